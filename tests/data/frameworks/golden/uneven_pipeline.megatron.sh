#!/bin/bash
# Megatron-LM (core_v0.19) pretrain_gpt.py arguments written by monarch-sim for "llama3-70b" on 96 GPUs (data parallel 2).
# Add the data, optimizer and checkpoint arguments of the run.
MONARCH_ARGS=(
  --tensor-model-parallel-size 8
  --pipeline-model-parallel-size 6
  --context-parallel-size 1
  --sequence-parallel
  --decoder-first-pipeline-num-layers 12
  --decoder-last-pipeline-num-layers 12
  --overlap-grad-reduce
  --recompute-granularity full
  --recompute-method uniform
  --recompute-num-layers 1
  --micro-batch-size 1
  --global-batch-size 128
  --bf16
  --cross-entropy-loss-fusion
  --num-layers 80
  --hidden-size 8192
  --num-attention-heads 64
  --group-query-attention
  --num-query-groups 8
  --ffn-hidden-size 28672
  --seq-length 8192
  --max-position-embeddings 8192
  --tokenizer-type NullTokenizer
  --vocab-size 128256
  --swiglu
  --normalization RMSNorm
  --position-embedding-type rope
  --disable-bias-linear
  --untie-embeddings-and-output-weights
)
torchrun --nproc-per-node 8 --nnodes 12 pretrain_gpt.py "${MONARCH_ARGS[@]}" "$@"

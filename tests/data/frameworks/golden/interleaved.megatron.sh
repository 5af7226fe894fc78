#!/bin/bash
# Megatron-LM (core_v0.19) pretrain_gpt.py arguments written by monarch-sim for "llama3-70b" on 64 GPUs (data parallel 2).
# Add the data, optimizer and checkpoint arguments of the run.
MONARCH_ARGS=(
  --tensor-model-parallel-size 8
  --pipeline-model-parallel-size 4
  --context-parallel-size 1
  --sequence-parallel
  --num-virtual-stages-per-pipeline-rank 5
  --use-distributed-optimizer
  --overlap-grad-reduce
  --overlap-param-gather
  --micro-batch-size 1
  --global-batch-size 64
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
torchrun --nproc-per-node 8 --nnodes 8 pretrain_gpt.py "${MONARCH_ARGS[@]}" "$@"

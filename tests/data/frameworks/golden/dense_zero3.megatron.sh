#!/bin/bash
# Megatron-LM (core_v0.19) pretrain_gpt.py arguments written by monarch-sim for "llama3-8b" on 64 GPUs (data parallel 32).
# Add the data, optimizer and checkpoint arguments of the run.
MONARCH_ARGS=(
  --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 1
  --context-parallel-size 1
  --sequence-parallel
  --use-megatron-fsdp
  --data-parallel-sharding-strategy optim_grads_params
  --overlap-grad-reduce
  --overlap-param-gather
  --recompute-granularity selective
  --micro-batch-size 2
  --global-batch-size 256
  --bf16
  --cross-entropy-loss-fusion
  --num-layers 32
  --hidden-size 4096
  --num-attention-heads 32
  --group-query-attention
  --num-query-groups 8
  --ffn-hidden-size 14336
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

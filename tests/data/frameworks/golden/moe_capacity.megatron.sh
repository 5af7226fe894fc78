#!/bin/bash
# Megatron-LM (core_v0.19) pretrain_gpt.py arguments written by monarch-sim for "mixtral" on 64 GPUs (data parallel 16).
# Add the data, optimizer and checkpoint arguments of the run.
MONARCH_ARGS=(
  --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 2
  --context-parallel-size 1
  --expert-model-parallel-size 8
  --expert-tensor-parallel-size 2
  --sequence-parallel
  --overlap-grad-reduce
  --micro-batch-size 1
  --global-batch-size 256
  --bf16
  --cross-entropy-loss-fusion
  --num-layers 32
  --hidden-size 4096
  --num-attention-heads 32
  --group-query-attention
  --num-query-groups 8
  --ffn-hidden-size 14336
  --seq-length 4096
  --max-position-embeddings 4096
  --tokenizer-type NullTokenizer
  --vocab-size 32000
  --swiglu
  --normalization RMSNorm
  --position-embedding-type rope
  --disable-bias-linear
  --untie-embeddings-and-output-weights
  --num-experts 8
  --moe-router-topk 2
  --moe-ffn-hidden-size 14336
  --moe-token-dispatcher-type alltoall
  --moe-expert-capacity-factor 1.25
  --moe-pad-expert-input-to-capacity
)
torchrun --nproc-per-node 8 --nnodes 8 pretrain_gpt.py "${MONARCH_ARGS[@]}" "$@"

#!/bin/bash
# DeepSpeed 0.19 config and Megatron-DeepSpeed pretrain_gpt.py flags written by monarch-sim for "llama3-8b" on 64 GPUs (data parallel 32).
cat > ds_config.json <<'EOF'
{
  "train_batch_size": 256,
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 4,
  "steps_per_print": 10,
  "zero_optimization": {
    "stage": 3,
    "overlap_comm": true,
    "contiguous_gradients": true,
    "reduce_scatter": true,
    "reduce_bucket_size": 500000000,
    "allgather_bucket_size": 500000000,
    "stage3_prefetch_bucket_size": 50000000
  },
  "bf16": { "enabled": true },
  "fp16": { "enabled": false }
}
EOF
MONARCH_ARGS=(
  --deepspeed
  --deepspeed_config ds_config.json
  --zero-stage 3
  --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 1
  --no-pipeline-parallel
  --sequence-parallel
  --recompute-granularity selective
  --micro-batch-size 2
  --global-batch-size 256
  --bf16
  --num-layers 32
  --hidden-size 4096
  --num-attention-heads 32
  --num-key-value-heads 8
  --ffn-hidden-size 14336
  --seq-length 8192
  --max-position-embeddings 8192
  --vocab-size 128256
  --swiglu
  --normalization rmsnorm
  --use-rotary-position-embeddings
  --no-position-embedding
  --disable-bias-linear
  --untie-embeddings-and-output-weights
  --use-flash-attn-v2
)
deepspeed pretrain_gpt.py "${MONARCH_ARGS[@]}" "$@"

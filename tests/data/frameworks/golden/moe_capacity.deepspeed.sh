#!/bin/bash
# DeepSpeed 0.19 config and Megatron-DeepSpeed pretrain_gpt.py flags written by monarch-sim for "mixtral" on 64 GPUs (data parallel 16).
cat > ds_config.json <<'EOF'
{
  "train_batch_size": 256,
  "train_micro_batch_size_per_gpu": 1,
  "gradient_accumulation_steps": 16,
  "steps_per_print": 10,
  "zero_optimization": {
    "stage": 0,
    "overlap_comm": true,
    "contiguous_gradients": true,
    "reduce_scatter": true,
    "reduce_bucket_size": 500000000,
    "allgather_bucket_size": 500000000
  },
  "bf16": { "enabled": true },
  "fp16": { "enabled": false }
}
EOF
MONARCH_ARGS=(
  --deepspeed
  --deepspeed_config ds_config.json
  --zero-stage 0
  --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 2
  --sequence-parallel
  --micro-batch-size 1
  --global-batch-size 256
  --bf16
  --num-layers 32
  --hidden-size 4096
  --num-attention-heads 32
  --num-key-value-heads 8
  --ffn-hidden-size 14336
  --seq-length 4096
  --max-position-embeddings 4096
  --vocab-size 32000
  --swiglu
  --normalization rmsnorm
  --use-rotary-position-embeddings
  --no-position-embedding
  --disable-bias-linear
  --untie-embeddings-and-output-weights
  --use-flash-attn-v2
  --num-experts 8
  --topk 2
  --moe-expert-parallel-size 8
  --enable-expert-tensor-parallelism
  --moe-train-capacity-factor 1.25
)
deepspeed pretrain_gpt.py "${MONARCH_ARGS[@]}" "$@"

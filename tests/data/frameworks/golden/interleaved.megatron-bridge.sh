# Megatron-Bridge 0.6 scripts/training/run_recipe.py overrides written by monarch-sim for "llama3-70b" on 64 GPUs (data parallel 2).
# Launch: torchrun --nproc-per-node 8 --nnodes 8 scripts/training/run_recipe.py --recipe RECIPE --mode pretrain $(grep -v '^#' THIS_FILE)
model.tensor_model_parallel_size=8
model.pipeline_model_parallel_size=4
model.context_parallel_size=1
model.sequence_parallel=true
model.virtual_pipeline_model_parallel_size=5
model.num_layers=80
model.hidden_size=8192
model.num_attention_heads=64
model.num_query_groups=8
model.ffn_hidden_size=28672
model.vocab_size=128256
model.seq_length=8192
dataset.seq_length=8192
model.share_embeddings_and_output_weights=false
model.normalization=RMSNorm
model.gated_linear_unit=true
model.position_embedding_type=rope
model.add_bias_linear=false
train.micro_batch_size=1
train.global_batch_size=64
ddp.use_distributed_optimizer=true
ddp.overlap_grad_reduce=true
ddp.overlap_param_gather=true
comm_overlap.tp_comm_overlap=false
model.cross_entropy_loss_fusion=true
mixed_precision=bf16_mixed

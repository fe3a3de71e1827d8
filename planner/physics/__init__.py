"""Layer 3a, physics: what fits on a GPU and how long it takes (pure functions on numbers).

memory       the model's shape and a GPU's memory by part, the fit test, memory a workload states itself
memory_training  training memory per GPU: weights, gradients, optimizer state (ZeRO), activations
memory_inference  inference memory per GPU: weights at serving precision, KV cache, the batch that fits
gpus         what a GPU model can do, how a candidate's GPUs are joined, precision and kernel efficiency (MFU)
collectives  all-reduce and other collectives over NVLink and the network, and how much of them compute hides
speed        the training step (W of training), and runs scaled from a reference measurement
step_many    the training step over many layouts at once (what the layout search orders them by)
generation   W of generation jobs: prefill, decode, the bandwidth bound, a floor for screening
layout       one training layout (TP, CP, PP, DP, EP, ZeRO, recomputation, micro-batch): what speed and memory take
parallelism  the layouts a recipe allows and the search for the fastest
recipes      what each training framework allows and keeps (layout axes, ZeRO stages, loss memory)
deepspeed_estimate  DeepSpeed's own ZeRO memory estimators, reproduced to check memory against
hardware_shape  a hardware shape, the estimate record, a workload prepared for estimating on every shape
estimate     the adapter from a workload and a hardware shape to the above
estimate_table  `planner estimate` for workloads: the fastest shape per GPU model and count, the best few
batching     continuous batching on one replica, step by step (TTFT and TPOT under load)
serving      a replica's serving capacity within the SLO, in closed form from that step model
storage      a job's data and checkpoints on a storage option: read, write, restore and staging hours, its price
"""

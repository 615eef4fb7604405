"""The RL engine: task, model, rollout, losses, sampling, configurations, SFT, the trainer, checkpoints, run logs."""

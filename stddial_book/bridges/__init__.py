"""Bridges to other libraries: TRL's GRPOConfig and GRPOTrainer."""

"""The shipped autoencoders (weights and metadata), installed with the wheel as ``swflow.checkpoints``."""

"""Quality of a finished run: metrics (FID, KID, latent SW, precision/recall, copy rate), `swflow evaluate` /
`compare`, and pictures (grids, scatter plots, animations).
"""

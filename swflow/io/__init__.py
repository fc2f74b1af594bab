"""Data in and out: datasets and the public/private split, a user's images, encoded latents, declared
populations, HDF5 outputs, staged output directories and resource checks.
"""

"""The one simulator loop and what runs in it: the Simulator base, the particle flow, the callbacks that
observe a run, the communicator of a flow sharded over torch.distributed ranks, thread and RNG etiquette.
"""

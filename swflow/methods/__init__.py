"""The methods: the registry (one MethodSpec each), the release strategies (how a method touches the
private rows), the flows' builders (flows.py, histogram.py), the generator baselines (generators/) and the
replayable FlowModel.
"""

"""One measured training configuration: the BERT workload, FLOP counting, the parallel
strategies, the job protocol between launcher and ranks, the launch, and the train run.

May import core, energy, system and tracking; never the sweep, fit or serve stages.
"""

"""WorldSample: real-robot RL with world-model-generated counterfactual data.

Importing the package is cheap on purpose: heavy dependencies (Ray, MuJoCo, torch) are imported
by the submodules that need them, never here.
"""

__version__ = "0.1.0"

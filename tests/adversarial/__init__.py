"""Adversarial candidates for the evaluation engine: cheats that fake correctness or speed, and
honest but unusual candidates that must stay correct. `cases.py` holds the CPU cases, `gpu_cases.py`
the CUDA ones, `tasks/` the task files they target; `tests/test_adversarial.py` runs them.
"""

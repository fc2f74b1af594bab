"""From what a user asks to a finished run: the frozen settings tree, the resolved RunPlan, fit(), run
directories, class-conditional runs and the Synthesizer estimator.
"""

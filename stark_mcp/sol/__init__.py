"""Speed of light: the physical floor of a problem on a machine and how close a time comes to it.

Pure pieces (no IO): ``model`` (the records), ``published`` (datasheet peaks), ``roofline`` (the
floor, the fraction, the verdict's floor check), ``text`` (how prompts and tables say it).
``calibration`` keeps measured peaks on disk (parent side). What runs the problem's code lives in
the problem's reference jail (``evaluator/reference/sol_count.py``), what touches the device in the
evaluator's trusted worker (``evaluator/trusted/sol_calibrate.py``). See docs/sol.md.
"""

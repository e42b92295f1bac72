"""The course's experiments: every number of a particular run, one module per ``results/ch*`` family.

The tiers above hold mechanism (what trains, measures and compares, taking its sizes as
arguments); a module here holds one experiment's choices (sizes, seeds, budgets, recipes, the
results files it writes) and runs it: ``python -m course_utils.experiments.<name> --help``.

- ``recipes``: the named CIFAR-10 recipes, ``RECIPES``, each with a note on its numbers and history;
- ``score_functions``: chapter 01's four scores, timed and trained (``ch01_score_functions``);
- ``layer_comparison``: chapter 02's attention, RNN and convolution side by side (``ch02_layer_comparison``);
- ``position_extrapolation``: chapter 05's encodings beyond the training length (``ch05_position_extrapolation``);
- ``seq2seq``: chapter 06's full run of the digit-reversal Transformer (``ch06_seq2seq`` and its weights);
- ``cpu_recipe``: chapter 07's half-hour CPU runs, seed by seed (``ch07_vit_cpu*``, ``ch07_resnet_cpu*``),
  and their time-to-accuracy tables (``bench_cpu_recipe*``, ``bench_resnet_recipe``);
- ``sweep``: chapter 08's budgets, ladder, levers and method, and their ablations, range tests and
  searches (``ch08_ablation_*``, ``ch08_lr_range_*``, ``ch08_search_*``);
- ``noise_rule``: how often chapter 08's rules for reading seeds err, simulated (``ch08_noise_rule``);
- ``gpu_recipe``: the ``gpu`` recipe, whole or cut to fit a GPU's time (``ch08_vit_gpu*``);
- ``gpu_window``: a GPU lent for minutes: check it, time the step, train ``gpu_fast`` (``ch08_gpu_fast*``).

Chapter 04's toy task (``training.toy_task``) is mechanism, not an experiment: it writes no
result, and chapters 04 and 05 choose its sizes, steps and seeds in their own cells.  The speed
benchmarks (``results/bench_*``) are the repository's ``benchmarks/``.

May import the top level, ``references``, ``models``, ``training`` and itself; only ``cli``
imports it.  A stored result's provenance names the command that made it, as it was then:
``rerun_command`` gives today's spelling of a command from before the modules moved here.
"""

from __future__ import annotations

# module of the command as stored in a result's provenance -> the module that runs it today
MOVED = {
    "benchmarks.score_functions": "course_utils.experiments.score_functions",
    "benchmarks.layer_comparison": "course_utils.experiments.layer_comparison",
    "benchmarks.position_extrapolation": "course_utils.experiments.position_extrapolation",
    "course_utils.cli.seq2seq": "course_utils.experiments.seq2seq",
    "benchmarks.cpu_recipe": "course_utils.experiments.cpu_recipe",
    "course_utils.cli.sweep": "course_utils.experiments.sweep",
    "benchmarks.noise_rule": "course_utils.experiments.noise_rule",
    "benchmarks.gpu_recipe": "course_utils.experiments.gpu_recipe",
    "benchmarks.gpu_window": "course_utils.experiments.gpu_window",
}


def rerun_command(command: str) -> str:
    """A stored provenance's ``command`` as it runs today: ``python -m benchmarks.cpu_recipe --seeds 0``
    -> ``python -m course_utils.experiments.cpu_recipe --seeds 0``; the arguments are unchanged
    (a command that names no moved module comes back as it is)."""
    words = command.split(" ")
    for i, word in enumerate(words[:-1]):
        if word == "-m" and words[i + 1] in MOVED:
            words[i + 1] = MOVED[words[i + 1]]
            break
    return " ".join(words)

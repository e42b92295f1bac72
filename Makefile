# The course's commands: `make help` lists them (each target says what it does once, in its `## ` note).
# `make book` and `make test` are all a newcomer needs (README.md).  Everything runs inside the virtual
# environment $(VENV), created on first use.  Experiments (results/ch*) run through course_utils.experiments,
# speed benchmarks (results/bench_*) through benchmarks/; each module's docstring says what it measures and how.

#> the virtual environment everything runs in (a conda environment's prefix works too)
VENV   ?= .venv
#> the python that creates it
PYTHON ?= python3
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
TEST_WORKERS ?= 2
IDS    := $(notdir $(patsubst %/,%,$(wildcard solutions/*/)))
NBGRADER := cd autograde && PATH="$(abspath $(BIN)):$$PATH" $(abspath $(BIN))/nbgrader
EXP    := $(PY) -m course_utils.experiments
#> train-gpu-short: the minutes to fit on one GPU
MINUTES ?= 6
#> gpu-window: the whole command's minutes on a GPU lent for a window
WINDOW_MINUTES ?= 9.4
#> gpu-method: the minutes chapter 08's half-hour method may take of a lease (gpu-lease)
METHOD_MINUTES ?= 4
#> gpu-window: the GPU machine's own python (no virtual environment there)
GPU_PY ?= python3
# the speed benchmarks `make bench` runs on a CPU, each also `make bench-<name>`; BENCH_ARGS_<name> adds arguments
BENCHES := attention_kernels kv_cache token_grid data_pipeline trivial_augment vit_throughput
BENCH_ARGS_attention_kernels := --threads 1

export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: help venv book serve test lab execute release class-edition collect autograde feedback grades clean \
	score-functions layer-comparison position-extrapolation seq2seq train-laptop train-cpu train-cpu-float32 \
	train-cpu-avx2 train-cpu-avx2-init train-cpu-avx2-b64 train-cpu-avx2-pad2 train-cpu-avx2-seqpool train-cpu-avx2-linear train-cpu-stem2 train-cpu-stem2-pad4 train-cpu-stem122 train-cpu-stem122-ema train-cpu-stem122-screens train-cpu-stem122-prog train-cpu-stem122-white train-cpu-stem122-trivial train-cpu-stem122-x2 train-cpu-stem122-dp train-cpu-stem122-mirror train-cpu-stem122-mirrorpos train-cpu-airbench train-cpu-airbench-e18 train-cpu-airbench-tail train-cpu-airbench-tail-49k train-cpu-airbench-lsa train-cpu-stem122-ls0 train-cpu-stem122-b32 train-cpu-wide train-cpu-avx2-stem122 train-cpu-avx2-stem122-held train-resnet sweep levers-model method-half-hour method-test sweep-cpu noise-rule train-gpu train-gpu-short gpu-window gpu-method gpu-lease gpu-window-prep jpeg-cost \
	bench bench-cpu-precision bench-cpu-precision-avx2 bench-cpu-recipe-steps gpu-check notebook-times

help: ## this list: every target's `## ` note, then every variable's `#> ` note with its default
	@awk '/^##@ / {printf "\n%s\n", substr($$0, 5)} \
	     /^[a-z0-9%-]+:.*## / {t = substr($$0, 1, index($$0, ":") - 1); gsub(/%/, "<name>", t); \
	                           printf "  make %-26s %s\n", t, substr($$0, index($$0, "## ") + 3)} \
	     /^#> / {note = substr($$0, 4); next} \
	     note != "" && /^[A-Z_]+ *[?:]?= / {split($$0, v, / *[?:]?= */); \
	                                          vars = vars sprintf("  %-31s %s\n", v[1] "=" v[2], note)} \
	     {note = ""} \
	     END {printf "\nVariables (make TARGET NAME=value)\n%s", vars}' $(MAKEFILE_LIST)

##@ Learners, authors, instructors
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[all]"
	@rm -f $(VENV)/.installed-*
	@touch $@

venv: $(STAMP) ## the virtual environment with everything installed (every target makes it first)

book: $(STAMP) ## the book in _build/html; SOLUTIONS=0 leaves the solutions out, for a class being graded
	$(PY) tools/book_pages.py $(if $(filter 0 no false,$(SOLUTIONS)),--no-solutions)
	$(BIN)/jupyter-book build . -W --keep-going --all
	@echo
	@echo "The book is in $(abspath _build/html). Open $(abspath _build/html/index.html)"
	@echo "or run 'make serve' and visit http://127.0.0.1:8000"

serve: ## the built book at http://127.0.0.1:8000
	$(PY) -m http.server --bind 127.0.0.1 --directory _build/html 8000

test: $(STAMP) ## every test: ruff (lint, format), the notebook check on this CPU's kernels and another's, then the suite (tools/run_tests.py)
	-bash tools/ensure_chromium.sh
	-bash tools/ensure_postgres.sh
	-bash tools/ensure_bubblewrap.sh
	$(PY) tools/run_tests.py --workers $(TEST_WORKERS)

lab: $(STAMP) ## JupyterLab on the student notebooks
	$(BIN)/jupyter lab notebooks

execute: $(STAMP) ## re-run the solution notebooks in full mode and store their outputs (authors)
	for id in $(IDS); do \
	  COURSE_FAST=0 $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.timeout=-1 solutions/$$id/$$id.ipynb || exit 1; \
	done

release: $(STAMP) ## regenerate notebooks/ from solutions/ (instructors, authors)
	$(PY) tools/setup_cell.py
	for id in $(IDS); do ( $(NBGRADER) generate_assignment $$id --force ) || exit 1; done

class-edition: $(STAMP) ## OUT=dir [URL=...]: the class edition (notebooks, a learner's package, the book; no answer) in dir
	@test -n "$(OUT)" || (echo "usage: make class-edition OUT=<folder> [URL=https://github.com/<owner>/<repo>]"; exit 2)
	$(PY) tools/class_edition.py --out "$(OUT)" $(if $(URL),--url "$(URL)") --html

collect: $(STAMP) ## ZIP=<zip> ID=<id>: a Canvas or Moodle zip into autograde/submitted/<student>/<id>/
	@test -n "$(ZIP)" -a -n "$(ID)" || (echo "usage: make collect ZIP=submissions.zip ID=<assignment id>"; exit 2)
	$(PY) -m course_utils.cli.collect "$(ZIP)" $(ID) --course autograde

autograde: $(STAMP) ## ID=<id> [JOBS=N] [FORCE=1] [NO_SANDBOX=1]: grade in parallel, resumable, sandboxed (grading/autograde.py)
	@test -n "$(ID)" || (echo "usage: make autograde ID=<assignment id> [JOBS=N] [FORCE=1]"; exit 2)
	$(PY) -m course_utils.cli.autograde $(ID) $(if $(JOBS),--jobs $(JOBS)) $(if $(FORCE),--force) \
		$(if $(NO_SANDBOX),--no-sandbox)

feedback: $(STAMP) ## ID=<id>: private feedback, each test's points and message, never the hidden tests' code
	@test -n "$(ID)" || (echo "usage: make feedback ID=<assignment id>"; exit 2)
	$(PY) -m course_utils.cli.feedback $(ID)

grades: $(STAMP) ## autograde/grades/<id>.csv per assignment and autograde/grades/canvas.csv
	$(PY) -m course_utils.cli.export --course autograde

clean: ## remove the built book
	rm -rf _build book/chapters

##@ Experiments: results/ch* (and chapter 07's time-to-accuracy tables), python -m course_utils.experiments.<name>
score-functions: $(STAMP) ## results/ch01_score_functions.json (about a minute)
	$(EXP).score_functions

layer-comparison: $(STAMP) ## results/ch02_layer_comparison.json
	$(EXP).layer_comparison

position-extrapolation: $(STAMP) ## results/ch05_position_extrapolation.json
	$(EXP).position_extrapolation

seq2seq: $(STAMP) ## results/ch06_seq2seq.json and ch06_seq2seq_model.pth
	$(EXP).seq2seq

train-laptop: $(STAMP) ## results/ch07_vit_laptop.json: the laptop recipe on 10,000 images, what chapter 07's own ViT is compared with
	$(PY) -m course_utils.cli.train --recipe laptop --train-images 10000 --out runs/ch07_vit_laptop --result ch07_vit_laptop

train-cpu: $(STAMP) ## results/ch07_vit_cpu*.json, bench_cpu_recipe.json: three seeds of the cpu recipe (half an hour each)
	$(EXP).cpu_recipe --seeds 0 1 2

train-cpu-float32: $(STAMP) ## results/ch07_vit_cpu_float32*.json, bench_cpu_recipe_float32.json: cpu_float32, three seeds
	$(EXP).cpu_recipe --recipe cpu_float32 --seeds 0 1 2

train-cpu-avx2: $(STAMP) ## results/ch07_vit_cpu_avx2*.json, bench_cpu_recipe_avx2.json: cpu_avx2 on an AVX2-only CPU
	$(EXP).cpu_recipe --recipe cpu_avx2 --seeds 0 1 2

train-cpu-avx2-init: $(STAMP) ## results/ch07_vit_cpu_avx2_init*.json, bench_cpu_recipe_avx2_init.json: cpu_avx2 with PyTorch's default initialisation
	$(EXP).cpu_recipe --recipe cpu_avx2_init --seeds 0 1 2

train-cpu-avx2-b64: $(STAMP) ## results/ch07_vit_cpu_avx2_b64*.json, bench_cpu_recipe_avx2_b64.json: cpu_avx2_init at the cpu recipe's batch and learning rate
	$(EXP).cpu_recipe --recipe cpu_avx2_b64 --seeds 0 1 2

train-cpu-avx2-pad2: $(STAMP) ## results/ch07_vit_cpu_avx2_pad2*.json, bench_cpu_recipe_avx2_pad2.json: cpu_avx2_b64 with two-pixel crops
	$(EXP).cpu_recipe --recipe cpu_avx2_pad2 --seeds 0 1 2

train-cpu-avx2-seqpool: $(STAMP) ## results/ch07_vit_cpu_avx2_seqpool*.json, bench_cpu_recipe_avx2_seqpool.json: cpu_avx2_pad2 with sequence pooling
	$(EXP).cpu_recipe --recipe cpu_avx2_seqpool --seeds 0 1 2

train-cpu-avx2-linear: $(STAMP) ## results/ch07_vit_cpu_avx2_linear*.json, bench_cpu_recipe_avx2_linear.json: cpu_avx2_pad2 with a linear decay
	$(EXP).cpu_recipe --recipe cpu_avx2_linear --seeds 0 1 2

train-cpu-stem2: $(STAMP) ## results/ch07_vit_cpu_stem2*.json, bench_cpu_recipe_stem2.json: the cpu recipe with two convolutions per tokenizer width, on 2 cores with native bf16
	$(EXP).cpu_recipe --recipe cpu_stem2 --seeds 0 1 2

train-cpu-stem2-pad4: $(STAMP) ## results/ch07_vit_cpu_stem2_pad4*.json, bench_cpu_recipe_stem2_pad4.json: cpu_stem2 with four-pixel crops and one epoch fewer
	$(EXP).cpu_recipe --recipe cpu_stem2_pad4 --seeds 0 1 2

train-cpu-stem122: $(STAMP) ## results/ch07_vit_cpu_stem122*.json, bench_cpu_recipe_stem122.json: cpu_stem2_pad4 with one convolution at 32x32
	$(EXP).cpu_recipe --recipe cpu_stem122 --seeds 0 1 2

train-cpu-stem122-ema: $(STAMP) ## results/ch07_vit_cpu_stem122_ema*.json, bench_cpu_recipe_stem122_ema.json: cpu_stem122 measured as a moving average of its weights
	$(EXP).cpu_recipe --recipe cpu_stem122_ema --seeds 0 1 2

train-cpu-stem122-screens: $(STAMP) ## results/ch07_vit_cpu_stem122_{lr_down,lr_up,ls2,altflip,cropend}*.json and their tables: cpu_stem122 at a learning rate sqrt(2) lower, sqrt(2) higher, with label smoothing 0.2 (seed 0 each), with alternating flips (seeds 0-2), and with its last epochs on whole images (seed 1)
	$(EXP).cpu_recipe --recipe cpu_stem122_lr_down --seeds 0
	$(EXP).cpu_recipe --recipe cpu_stem122_lr_up --seeds 0
	$(EXP).cpu_recipe --recipe cpu_stem122_ls2 --seeds 0
	$(EXP).cpu_recipe --recipe cpu_stem122_altflip --seeds 0 1 2
	$(EXP).cpu_recipe --recipe cpu_stem122_cropend --seeds 1

train-cpu-stem122-prog: $(STAMP) ## results/ch07_vit_cpu_stem122_prog*.json, bench_cpu_recipe_stem122_prog.json: cpu_stem122 progressively resized (the first half of its epochs on 24x24 images), a one-seed screen
	$(EXP).cpu_recipe --recipe cpu_stem122_prog --seeds 0

train-cpu-stem122-white: $(STAMP) ## results/ch07_vit_cpu_stem122_white*.json, bench_cpu_recipe_stem122_white.json: cpu_stem122 with its first layer fixed to patch whitening, a one-seed screen
	$(EXP).cpu_recipe --recipe cpu_stem122_white --seeds 0

train-cpu-stem122-trivial: $(STAMP) ## results/ch07_vit_cpu_stem122_trivial*.json, bench_cpu_recipe_stem122_trivial.json: cpu_stem122 with TrivialAugment, a one-seed screen
	$(EXP).cpu_recipe --recipe cpu_stem122_trivial --seeds 0

train-cpu-stem122-x2: $(STAMP) ## results/ch07_vit_cpu_stem122_x2*.json, bench_cpu_recipe_stem122_x2.json: cpu_stem122 for twice its epochs (about an hour), what twice the compute buys
	$(EXP).cpu_recipe --recipe cpu_stem122_x2 --seeds 0

train-cpu-stem122-dp: $(STAMP) ## results/ch07_vit_cpu_stem122_dp*.json, bench_cpu_recipe_stem122_dp.json: cpu_stem122 with stochastic depth 0.1, a one-seed screen
	$(EXP).cpu_recipe --recipe cpu_stem122_dp --seeds 0

train-cpu-stem122-mirror: $(STAMP) ## results/ch07_vit_cpu_stem122_mirror*.json, bench_cpu_recipe_stem122_mirror.json: cpu_stem122 tied to its mirror image, a one-seed screen
	$(EXP).cpu_recipe --recipe cpu_stem122_mirror --seeds 0

train-cpu-stem122-mirrorpos: $(STAMP) ## results/ch07_vit_cpu_stem122_mirrorpos*.json, bench_cpu_recipe_stem122_mirrorpos.json: cpu_stem122 with a left-right symmetric position table, a one-seed screen
	$(EXP).cpu_recipe --recipe cpu_stem122_mirrorpos --seeds 0

train-cpu-airbench: $(STAMP) ## results/ch07_vit_cpu_airbench*.json, bench_cpu_recipe_airbench.json: the ViT on airbench's tokenizer, that tokenizer trained with airbench's SGD, seed 0 first
	$(EXP).cpu_recipe --recipe cpu_airbench --seeds 0

train-cpu-airbench-e18: $(STAMP) ## results/ch07_vit_cpu_airbench_e18*.json, bench_cpu_recipe_airbench_e18.json: cpu_airbench for 18 epochs, seed 0 first
	$(EXP).cpu_recipe --recipe cpu_airbench_e18 --seeds 0

train-cpu-airbench-tail: $(STAMP) ## results/ch07_vit_cpu_airbench_tail*.json, bench_cpu_recipe_airbench_tail.json: cpu_airbench with one more conv before the pool to the tokens, seed 0 first
	$(EXP).cpu_recipe --recipe cpu_airbench_tail --seeds 0

train-cpu-airbench-tail-49k: $(STAMP) ## results/ch07_vit_cpu_airbench_tail_49k*.json, bench_cpu_recipe_airbench_tail_49k.json: cpu_airbench_tail trained on 49,000 images for the final reading, three seeds
	$(EXP).cpu_recipe --recipe cpu_airbench_tail_49k --seeds 0 1 2

train-cpu-airbench-lsa: $(STAMP) ## results/ch07_vit_cpu_airbench_lsa*.json, bench_cpu_recipe_airbench_lsa.json: cpu_airbench_tail with locality self-attention, a one-seed screen
	$(EXP).cpu_recipe --recipe cpu_airbench_lsa --seeds 0

train-cpu-stem122-ls0: $(STAMP) ## results/ch07_vit_cpu_stem122_ls0*.json, bench_cpu_recipe_stem122_ls0.json: cpu_stem122 without label smoothing, a one-seed screen
	$(EXP).cpu_recipe --recipe cpu_stem122_ls0 --seeds 0

train-cpu-stem122-b32: $(STAMP) ## results/ch07_vit_cpu_stem122_b32*.json, bench_cpu_recipe_stem122_b32.json: cpu_stem122 at batch 32 (lr / sqrt(2)), a one-seed screen
	$(EXP).cpu_recipe --recipe cpu_stem122_b32 --seeds 0

train-cpu-wide: $(STAMP) ## results/ch07_vit_cpu_wide*.json, bench_cpu_recipe_wide.json: cpu_stem122 wider (tokenizer and Transformer), for the epochs the half hour holds
	$(EXP).cpu_recipe --recipe cpu_wide --seeds 0 1 2

train-cpu-avx2-stem122: $(STAMP) ## results/ch07_vit_cpu_avx2_stem122*.json, bench_cpu_recipe_avx2_stem122.json: cpu_stem122 in float32 for as many epochs as half an hour holds, on an AVX2-only CPU
	$(EXP).cpu_recipe --recipe cpu_avx2_stem122 --seeds 0 1 2

train-cpu-avx2-stem122-held: $(STAMP) ## results/ch07_vit_cpu_avx2_stem122_held*.json and its table: cpu_avx2_stem122 on this CPU held to AVX2 kernels (a stand-in for an AVX2-only CPU)
	ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 $(EXP).cpu_recipe --recipe cpu_avx2_stem122_held --seeds 0 1 2

train-resnet: $(STAMP) ## results/ch07_resnet_cpu*.json, bench_resnet_recipe.json: the resnet recipe (after train-cpu, same machine)
	$(EXP).cpu_recipe --recipe resnet --seeds 0 1 2

sweep: $(STAMP) ## results/ch08_{lr_range,ablation,search}_mini.json, ch08_ablation_small-data.json (resumable)
	$(EXP).sweep lr-range --budget mini
	$(EXP).sweep ablation --budget mini --seeds 0 1 2
	$(EXP).sweep ablation --budget small-data --only baseline schedule augment
	$(EXP).sweep search --budget mini --trials 30

levers-model: $(STAMP) ## results/ch08_levers_model_mini.json: stochastic depth and initialisation against the ladder's top run again beside them (3 seeds each)
	$(EXP).sweep ablation --budget mini --seeds 0 1 2 --only conv_tokenizer drop_path init_pytorch --result ch08_levers_model_mini

method-half-hour: $(STAMP) ## results/ch08_ablation_half_hour.json: chapter 08's method at chapter 07's half hour, 3 seeds a step (resumable; each run about half an hour on a 2-core bf16 CPU, seconds on a GPU)
	$(EXP).sweep ablation --budget half_hour --seeds 0 1 2

method-test: $(STAMP) ## results/ch08_method_test_half_hour.json: the method's last step read once on the test set (after method-half-hour, same checkout)
	$(EXP).sweep method-test --budget half_hour --seeds 0 1 2

sweep-cpu: $(STAMP) ## results/ch08_ablation_cpu.json: the ablation at chapter 07's budget (after train-cpu; its seed 0 is adopted)
	$(EXP).sweep ablation --budget cpu --only no_augment noam --adopt conv_tokenizer=runs/ch07_vit_cpu
	$(EXP).sweep ablation --budget cpu --only conv_tokenizer --seeds 1 2
	$(EXP).sweep ablation --budget cpu --only no_augment noam --seeds 1 2

noise-rule: $(STAMP) ## results/ch08_noise_rule.json (a simulation, no training)
	$(EXP).noise_rule

train-gpu: $(STAMP) ## results/ch08_vit_gpu.json: the gpu recipe on one GPU; STOP_AFTER=M stops within M minutes, again continues
	$(EXP).gpu_recipe --full $(if $(STOP_AFTER),--stop-after-minutes $(STOP_AFTER))

train-gpu-short: $(STAMP) ## results/ch08_vit_gpu_short.json: the gpu recipe cut to fit MINUTES on one GPU
	$(EXP).gpu_recipe --minutes $(MINUTES)

gpu-window: ## [OUT=dir]: on a GPU lent for minutes (its own python3): results/ch08_gpu_fast*.json, copied to OUT
	$(GPU_PY) -m course_utils.experiments.gpu_window --minutes $(WINDOW_MINUTES) $(if $(OUT),--out-dir $(OUT))

gpu-method: ## [OUT=dir]: on a GPU lent for minutes (its own python3): chapter 08's method at the half hour, the runs that fit (results/ch08_ablation_half_hour.json, ch08_method_test_half_hour.json), copied to OUT
	$(GPU_PY) -m course_utils.experiments.gpu_method --minutes $(METHOD_MINUTES) $(if $(OUT),--out-dir $(OUT))

gpu-lease: ## [OUT=dir]: all a lent GPU runs, one command of WINDOW_MINUTES: gpu-method's missing runs (METHOD_MINUTES at most), then gpu-window with the time left, never cut (an unfinished run continues in the next lease)
	start=$$(date +%s); \
	$(GPU_PY) -m course_utils.experiments.gpu_method --minutes $(METHOD_MINUTES) $(if $(OUT),--out-dir $(OUT)); \
	left=$$($(GPU_PY) -c "print($(WINDOW_MINUTES) - ($$(date +%s) - $$start) / 60)"); \
	$(GPU_PY) -m course_utils.experiments.gpu_window --minutes $$left --no-cut $(if $(OUT),--out-dir $(OUT))

jpeg-cost: $(STAMP) ## results/ch08_jpeg_cost.json: a finished gpu-window run's weights (runs/gpu_fast/best_model.pt) on the test images and on them JPEG-encoded once more
	$(EXP).jpeg_cost

gpu-window-prep: $(STAMP) ## here, on a clean commit, before gpu-window: .data/ and .code-stamp.json to carry along
	mkdir -p .data
	test -f .data/cifar10-jpeg.tar.gz || cp ../shared/data/cifar10-jpeg.tar.gz .data/
	$(PY) -c "from course_utils.results import code_stamp; print('wrote', code_stamp())"

##@ Speed benchmarks: results/bench_* (and notebook_times.json), python -m benchmarks.<name>
bench: $(addprefix bench-,$(BENCHES)) ## every CPU speed benchmark below, one after another (about 15 minutes)

bench-%: $(STAMP) ## results/bench_<name>.json, one of: attention_kernels kv_cache token_grid data_pipeline trivial_augment vit_throughput
	$(PY) -m benchmarks.$* $(BENCH_ARGS_$*)

bench-cpu-precision: $(STAMP) ## results/bench_cpu_precision.json: the cpu recipe's steps in bf16 and float32, side by side
	$(PY) -m benchmarks.cpu_precision

bench-cpu-precision-avx2: $(STAMP) ## results/bench_cpu_precision_avx2.json: the same for cpu_avx2, on an AVX2-only CPU
	$(PY) -m benchmarks.cpu_precision --no-compile --recipe cpu_avx2 --result bench_cpu_precision_avx2

bench-cpu-recipe-steps: $(STAMP) ## results/bench_cpu_recipe_steps.json: cpu_stem2_pad4's and cpu_stem122's training steps side by side
	$(PY) -m benchmarks.cpu_recipe_steps

gpu-check: $(STAMP) ## on a CUDA GPU: the tests' GPU paths, results/bench_gpu_pipeline*.json, bench_trivial_augment.json
	$(PY) -m pytest tests/references/test_references_on_devices.py tests/references/test_attention_kernels.py tests/training/test_augment.py -q
	$(PY) -m benchmarks.gpu_pipeline --profile
	$(PY) -m benchmarks.gpu_pipeline --profile --compile
	$(PY) -m benchmarks.gpu_pipeline --profile --compile-mode reduce-overhead
	$(PY) -m benchmarks.trivial_augment

notebook-times: $(STAMP) ## results/notebook_times.json: every chapter in full mode, cell by cell (on a quiet machine)
	$(PY) -m benchmarks.notebook_times

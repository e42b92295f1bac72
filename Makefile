# The course's commands.  `make book` and `make test` are all a newcomer needs (README.md).
# Everything runs inside the virtual environment $(VENV), created on first use.

VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
TEST_WORKERS ?= 2
IDS    := $(notdir $(patsubst %/,%,$(wildcard solutions/*/)))
NBGRADER := cd autograde && PATH="$(abspath $(BIN)):$$PATH" $(abspath $(BIN))/nbgrader

export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: help venv book serve test lab execute bench notebook-times train-laptop train-cpu train-cpu-float32 train-cpu-avx2 train-resnet train-gpu gpu-check gpu-window gpu-window-prep train-gpu-short sweep sweep-cpu release class-edition collect autograde feedback grades clean

help:
	@echo "make book       build the book into _build/html (first run installs everything into $(VENV));"
	@echo "                SOLUTIONS=0 builds it without solutions, for a class that is being graded"
	@echo "make test       run every test (library, notebooks, release, grading, book, browser)"
	@echo "make lab        JupyterLab on the student notebooks"
	@echo "make execute    re-run the solution notebooks and store their outputs (authors)"
	@echo "make release    regenerate notebooks/ from solutions/ (instructors, authors)"
	@echo "make bench      run the benchmarks; they write results/bench_*.json"
	@echo "make train-cpu  three seeds of the cpu recipe; time to 80%/85% per machine in results/bench_cpu_recipe.json"
	@echo "make train-cpu-float32  the cpu recipe in float32 (CPUs without native bf16), three seeds; results/bench_cpu_recipe_float32.json"
	@echo "make train-cpu-avx2  the same on a CPU with AVX2 and no AVX-512; results/bench_cpu_recipe_avx2.json"
	@echo "make train-resnet  three seeds of the ResNet's own recipe, the same half hour each (after train-cpu, same machine)"
	@echo "make train-gpu  the gpu recipe (chapter 08's course answer to question 1); writes results/ch08_vit_gpu.json"
	@echo "                STOP_AFTER=9 stops within 9 minutes; run it again to continue"
	@echo "make gpu-window OUT=dir  on a GPU lent for minutes: check it, measure the step, train gpu_fast, copy results to dir"
	@echo "make gpu-check  on a CUDA GPU: the tests' GPU paths and benchmarks.gpu_pipeline"
	@echo "make train-gpu-short MINUTES=6  the gpu recipe cut to fit MINUTES on one GPU; writes results/ch08_vit_gpu_short.json"
	@echo "make train-laptop  the laptop recipe chapter 07 compares a learner's ViT with"
	@echo "make notebook-times  every chapter in full mode, timed cell by cell (results/notebook_times.json)"
	@echo "make sweep      chapter 08's runs at the mini and small-data budgets; writes results/ch08_*.json"
	@echo "make sweep-cpu  chapter 08's ablation at chapter 07's budget (after train-cpu; one run per variant)"
	@echo "make class-edition OUT=dir  the class edition (no answers) in dir, with its book; URL=... says where it will live"
	@echo "make autograde ID=<id> / feedback ID=<id> / grades / collect ZIP=<zip> ID=<id>"

# ---------------------------------------------------------------- environment
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[all]"
	@rm -f $(VENV)/.installed-*
	@touch $@

venv: $(STAMP)

# ---------------------------------------------------------------- the book
# SOLUTIONS=0 leaves the solutions out, for a class that is being graded.
book: $(STAMP)
	$(PY) tools/book_pages.py $(if $(filter 0 no false,$(SOLUTIONS)),--no-solutions)
	$(BIN)/jupyter-book build . -W --keep-going --all
	@echo
	@echo "The book is in $(abspath _build/html). Open $(abspath _build/html/index.html)"
	@echo "or run 'make serve' and visit http://127.0.0.1:8000"

serve:
	$(PY) -m http.server --bind 127.0.0.1 --directory _build/html 8000

# ---------------------------------------------------------------- tests
# The notebook check twice (this machine's kernels, then another CPU's: tools/check_notebooks.py)
# and the test suite; each runs whatever the others did, and the summary at the end says which
# failed and which checks were skipped for want of an optional piece (Chromium, PostgreSQL,
# bubblewrap, a GPU).
test: $(STAMP)
	-bash tools/ensure_chromium.sh
	-bash tools/ensure_postgres.sh
	-bash tools/ensure_bubblewrap.sh
	$(PY) tools/run_tests.py --workers $(TEST_WORKERS)

# ---------------------------------------------------------------- learners
lab: $(STAMP)
	$(BIN)/jupyter lab notebooks

# ---------------------------------------------------------------- authors
execute: $(STAMP)
	for id in $(IDS); do \
	  COURSE_FAST=0 $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.timeout=-1 solutions/$$id/$$id.ipynb || exit 1; \
	done

bench: $(STAMP)
	$(PY) -m benchmarks.score_functions
	$(PY) -m benchmarks.layer_comparison
	$(PY) -m benchmarks.attention_kernels --threads 1
	$(PY) -m benchmarks.position_extrapolation
	$(PY) -m benchmarks.kv_cache
	$(PY) -m benchmarks.token_grid
	$(PY) -m benchmarks.data_pipeline
	$(PY) -m benchmarks.trivial_augment
	$(PY) -m benchmarks.vit_throughput

# Every chapter in full mode, cell by cell (the Setup page's table); run it on a quiet machine.
notebook-times: $(STAMP)
	$(PY) -m benchmarks.notebook_times

train-laptop: $(STAMP)
	$(PY) -m course_utils.cli.train --recipe laptop --train-images 10000 --out runs/ch07_vit_laptop --result ch07_vit_laptop

# Three seeds of the cpu recipe (about half an hour each on 2 cores with native bf16), then the
# time-to-accuracy table per machine (results/bench_cpu_recipe.json).
train-cpu: $(STAMP)
	$(PY) -m benchmarks.cpu_recipe --seeds 0 1 2

# The same recipe in float32 for a CPU without native bf16 (fewer epochs, the same half hour), after
# the side-by-side step benchmark of the two precisions (results/bench_cpu_precision.json).
train-cpu-float32: $(STAMP)
	$(PY) -m benchmarks.cpu_precision
	$(PY) -m benchmarks.cpu_recipe --recipe cpu_float32 --seeds 0 1 2

# The float32 recipe with the epochs that fill the half hour on a CPU whose widest vectors are AVX2.
train-cpu-avx2: $(STAMP)
	$(PY) -m benchmarks.cpu_precision --no-compile --recipe cpu_avx2 --result bench_cpu_precision_avx2
	$(PY) -m benchmarks.cpu_recipe --recipe cpu_avx2 --seeds 0 1 2

# Chapter 07's fair comparison: the ResNet with its own recipe (`resnet`: SGD, lr 0.1, weight decay
# 5e-4), three seeds in the same half hour per seed as the ViT's, on the same machine; the table is
# results/bench_resnet_recipe.json and seed 0 replaces results/ch07_resnet_cpu.json.
train-resnet: $(STAMP)
	$(PY) -m benchmarks.cpu_recipe --recipe resnet --seeds 0 1 2

# One GPU (results/ch08_vit_gpu_short.json projects the full run's time on the GPU it ran on): chapter
# 08 prints the result and the time to 94% and 95% validation accuracy.  On a machine lent for a fixed
# time, STOP_AFTER=M stops after the last epoch that ends within M minutes; the same command continues.
train-gpu: $(STAMP)
	$(PY) -m course_utils.cli.train --recipe gpu --out runs/gpu --result ch08_vit_gpu \
		$(if $(STOP_AFTER),--stop-after-minutes $(STOP_AFTER))

# On a machine with a CUDA GPU: the tests' GPU paths (the reference implementations against PyTorch's own
# in float32, bf16 and fp16; a training step that never waits for the device) and where the gpu
# recipe's step time goes, profiled, without torch.compile, with it, and with it and CUDA graphs
# (results/bench_gpu_pipeline*.json), and TrivialAugment's ways side by side (results/bench_trivial_augment.json).
gpu-check: $(STAMP)
	$(PY) -m pytest tests/test_references_on_devices.py tests/test_attention_kernels.py tests/test_augment.py -q
	$(PY) -m benchmarks.gpu_pipeline --profile
	$(PY) -m benchmarks.gpu_pipeline --profile --compile
	$(PY) -m benchmarks.gpu_pipeline --profile --compile-mode reduce-overhead
	$(PY) -m benchmarks.trivial_augment

# A GPU lent for a short window (about 15 minutes in all, start-up included): one command that checks the
# device, measures the gpu_fast recipe's step (FLOPs per image, images/s, share of the bf16 peak),
# trains it (cut to the epochs that fit, or continuing an unfinished run's checkpoint) with a hard stop,
# and copies the result, history and checkpoint to OUT (benchmarks/gpu_window.py).  It runs with the
# GPU machine's own python3 (no virtual environment there).  Here, first, on a clean commit:
# make gpu-window-prep (the data copy in .data/ and .code-stamp.json, both ignored by git, to carry
# along: the stamp lets the results name the commit even where the copy's git metadata is older);
# there: COURSE_CIFAR10=$$PWD/.data/cifar10-jpeg.tar.gz make gpu-window OUT=<folder brought back>.
WINDOW_MINUTES ?= 9.4
GPU_PY ?= python3
gpu-window:
	$(GPU_PY) -m benchmarks.gpu_window --minutes $(WINDOW_MINUTES) $(if $(OUT),--out-dir $(OUT))

gpu-window-prep: $(STAMP)
	mkdir -p .data
	test -f .data/cifar10-jpeg.tar.gz || cp ../shared/data/cifar10-jpeg.tar.gz .data/
	$(PY) -c "from course_utils.results import code_stamp; print('wrote', code_stamp())"

# One GPU for MINUTES minutes: the gpu recipe cut to the epochs that fit, and the full run's time projected.
MINUTES ?= 6
train-gpu-short: $(STAMP)
	$(PY) -m benchmarks.gpu_recipe --minutes $(MINUTES)

# Chapter 08's evidence (mini budget; interrupted runs resume; each run records its time).
sweep: $(STAMP)
	$(PY) -m course_utils.cli.sweep lr-range --budget mini
	$(PY) -m course_utils.cli.sweep ablation --budget mini --seeds 0 1 2
	$(PY) -m course_utils.cli.sweep ablation --budget small-data --only baseline schedule augment
	$(PY) -m course_utils.cli.sweep search --budget mini --trials 30

# chapter 08 at chapter 07's budget; seed 0 of the recipe is chapter 07's run
sweep-cpu: $(STAMP)
	$(PY) -m course_utils.cli.sweep ablation --budget cpu --only no_augment noam --adopt conv_tokenizer=runs/ch07_vit_cpu
	$(PY) -m course_utils.cli.sweep ablation --budget cpu --only conv_tokenizer --seeds 1 2
	$(PY) -m course_utils.cli.sweep ablation --budget cpu --only no_augment noam --seeds 1 2

# ---------------------------------------------------------------- instructors (nbgrader)
release: $(STAMP)
	$(PY) tools/setup_cell.py
	for id in $(IDS); do ( $(NBGRADER) generate_assignment $$id --force ) || exit 1; done

# The class edition (tools/class_edition.py): notebooks, a learner's package and the book, no answer.
class-edition: $(STAMP)
	@test -n "$(OUT)" || (echo "usage: make class-edition OUT=<folder> [URL=https://github.com/<owner>/<repo>]"; exit 2)
	$(PY) tools/class_edition.py --out "$(OUT)" $(if $(URL),--url "$(URL)") --html

# Canvas or Moodle zip -> autograde/submitted/<student>/<id>/ (course_utils/grading/collect.py)
collect: $(STAMP)
	@test -n "$(ZIP)" -a -n "$(ID)" || (echo "usage: make collect ZIP=submissions.zip ID=<assignment id>"; exit 2)
	$(PY) -m course_utils.cli.collect "$(ZIP)" $(ID) --course autograde

# Parallel, resumable, with per-submission memory and time limits (course_utils/grading/autograde.py):
# JOBS workers (default: one per core), only new or changed submissions unless FORCE=1; every kernel
# in a bubblewrap sandbox (course_utils/grading/sandbox.py), or without one when NO_SANDBOX=1.
autograde: $(STAMP)
	@test -n "$(ID)" || (echo "usage: make autograde ID=<assignment id> [JOBS=N] [FORCE=1]"; exit 2)
	$(PY) -m course_utils.cli.autograde $(ID) $(if $(JOBS),--jobs $(JOBS)) $(if $(FORCE),--force) \
		$(if $(NO_SANDBOX),--no-sandbox)

# Private feedback: each test's points and message, never the hidden tests' code.
feedback: $(STAMP)
	@test -n "$(ID)" || (echo "usage: make feedback ID=<assignment id>"; exit 2)
	$(PY) -m course_utils.cli.feedback $(ID)

# autograde/grades/<id>.csv per assignment and autograde/grades/canvas.csv (course_utils/grading/export.py)
grades: $(STAMP)
	$(PY) -m course_utils.cli.export --course autograde

clean:
	rm -rf _build book/chapters

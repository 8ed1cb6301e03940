# Two commands: `make demo` and `make test`. Both set up .venv from nothing.
#
# Torch: where a CUDA-capable torch is already installed system-wide (a GPU machine), the venv
# sees it through --system-site-packages and keeps it; elsewhere the CPU wheel is pinned, because
# an unpinned `torch` pulls a multi-GB CUDA build.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_OUT ?= demo_out

.PHONY: demo test setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@if $(PYTHON) -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then \
		echo "GPU torch found: keeping it"; \
		$(PYTHON) -m venv --system-site-packages $(VENV); \
		$(BIN)/pip install -q -e '.[dev,gpu]'; \
	else \
		echo "no GPU torch: installing the CPU build"; \
		$(PYTHON) -m venv $(VENV); \
		$(BIN)/pip install -q torch==2.13.0; \
		$(BIN)/pip install -q -e '.[dev]'; \
	fi
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m myxtts demo --out $(DEMO_OUT)

test: $(STAMP)
	$(BIN)/ruff check myxtts tests benchmarks scripts
	$(BIN)/python -m pytest -n auto --dist loadfile --durations=30

clean:
	rm -rf $(VENV) $(DEMO_OUT)

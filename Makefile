# The two commands of the README. Both create .venv when it is missing.
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_DIR ?= demo_out
# torch pinned here, not in pyproject: an unpinned torch pulls GBs of CUDA wheels.
INSTALL := $(VENV)/bin/pip install -q torch==2.13.0 -e ".[test,mpich,fem]"

.PHONY: demo test venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(INSTALL)
	touch $@

demo: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" bash examples/demo.sh $(DEMO_DIR)

test: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pytest -q -p no:cacheprovider -n 2 --timeout 900 tests

clean:
	rm -rf $(DEMO_DIR) .pytest_cache

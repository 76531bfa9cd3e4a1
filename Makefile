# The two commands of the README: `make digits` (the main job) and `make test`. Both set everything up first.
VENV ?= .venv
BIN := $(VENV)/bin
RESULTS ?= results/digits

.PHONY: setup digits papers papers-timing smoke gpu-check test test-matrix test-fast pip-check cluster-test cluster-down cluster-projection lint docs format regression bench report lock clean

setup:
	@SUITE_VENV=$(VENV) bash ci/setup.sh

# The main job: every strategy learns the embedded digits on local processes, then its report.
digits: setup
	$(BIN)/suite run scenarios/digits.yaml --out results/digits
	$(BIN)/suite report results/digits

# The papers' experiments reduced to the digits (scenarios/papers/reduced/): the quality ones, at equal
# images budgets (host-independent), then a page per paper beside its printed numbers in reports/papers/<paper>/.
PAPERS_QUALITY := paper000-quality paper002-wcgan paper003-grids
PAPERS_TIMING := paper000-weak paper001-speedup
papers: setup
	for s in $(PAPERS_QUALITY); do $(BIN)/suite run scenarios/papers/reduced/$$s.yaml --out results/papers/$$s || exit 1; \
		$(BIN)/suite report results/papers/$$s --out reports/papers/$${s%%-*}/$$s || exit 1; done
	$(BIN)/suite papers results/papers --out reports/papers

# The timing ones (weak scaling, cellular speedup): run them on a quiet machine, then the pages again.
papers-timing: setup
	for s in $(PAPERS_TIMING); do $(BIN)/suite run scenarios/papers/reduced/$$s.yaml --out results/papers/$$s || exit 1; \
		$(BIN)/suite report results/papers/$$s --out reports/papers/$${s%%-*}/$$s || exit 1; done
	$(BIN)/suite papers results/papers --out reports/papers

# A quick pipeline check: every strategy and engine for a few steps (nothing learns).
smoke: setup
	$(BIN)/suite run scenarios/smoke.yaml --out results/smoke
	$(BIN)/suite report results/smoke

# Run first on a GPU node: every strategy and installed engine on every GPU, checked; exit 4 without a GPU.
gpu-check: setup
	$(BIN)/suite gpu-check --out results/gpu-check

# The test suite (unit tests and real 1-4 process runs on CPU): every behaviour once, on the engine and launcher
# users meet first. `make test-matrix` checks the same behaviours on the other engines and launchers; CI runs both.
# The in-process tests run on two workers (pytest-xdist); then the real runs: two tests at a time (a test's module on
# one worker, so its fixtures run once), those whose timings, contention or noise are checked (marked quiet) one at a
# time after them, with the cores to themselves.
test: setup
	$(BIN)/python -m pytest -m "not matrix and not multiproc" -n 2
	$(BIN)/python -m pytest -m "not matrix and multiproc and not quiet" -n 2 --dist loadscope
	$(BIN)/python -m pytest -m "not matrix and multiproc and quiet"

test-matrix: setup
	$(BIN)/python -m pytest -m matrix

# The developer loop: unit tests without multi-process runs or slow training (under a minute on 2 cores).
test-fast: setup
	$(BIN)/python -m pytest -m "not multiproc and not slow" --ignore=tests/benchmarks -q

# The README's pip route, in a fresh virtual environment: `pip install ".[mpi,logs,fid]"` (through uv, PyPI's torch, the
# versions of ci/requirements.lock), then, outside the checkout, `suite scenarios`, `suite run quickstart` and its report,
# a tiny torch-engine run with its logs, and the scenarios whose engines are missing refused in one line
# (ci/pip_check.sh; about 7 minutes on a busy 2-core machine with uv's cache warm). .ci/run runs it.
pip-check: setup
	bash ci/pip_check.sh

# Every cluster launcher across a two-node cluster built here (network namespaces, sshd, munge, Slurm;
# root only; Debian's packages fetched and unpacked into a private root by ci/cluster/setup.sh, never installed), torn down afterwards; prints SKIPPED and
# exits 0 where it cannot run. Not part of `make test`; .ci/run runs it after. See docs/clusters.md.
cluster-test: setup
	@SUITE_VENV=$(VENV) bash ci/cluster/run.sh

# Remove what a killed cluster-test left (namespaces, processes, the fetched packages): ci/cluster/run.sh down.
cluster-down:
	bash ci/cluster/run.sh down

# The projection fitted on one node against two-node runs at 1 Gbit/s and 100 Mbit/s, in the same
# cluster; writes reports/cluster/projection.md (a few minutes; root only, as cluster-test).
cluster-projection: setup
	@SUITE_VENV=$(VENV) bash ci/cluster/run.sh projection

# Lint (pyflakes, pycodestyle, bugbear, import order, complexity), the formatter's check, the type check and the
# package's layers (import-linter's contracts in pyproject.toml); .ci/run runs it first.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy suite
	$(BIN)/lint-imports

# The documentation site: the scenario's JSON Schema, the scenario and CLI references generated from the code into
# docs/reference/ (committed; commit them again after a change), then `mkdocs build --strict` (a warning, such as a broken link or anchor, fails it) into site/; .ci/run runs it.
docs: setup
	$(BIN)/python ci/gen_docs.py docs/reference
	$(BIN)/mkdocs build --strict --site-dir site

# Apply the formatter and the import order.
format: setup
	$(BIN)/ruff check --select I --fix .
	$(BIN)/ruff format .

# The CI regression gate: this checkout against the merge base with main, paired and interleaved on
# this host (`suite gate`; exit 0 PASS, 1 FAIL, 5 INCONCLUSIVE, 2 bad input).
regression: setup
	bash ci/regression.sh

# Speed benchmarks (pytest-benchmark); not part of `make test`.
bench: setup
	$(BIN)/python -m pytest tests/benchmarks --benchmark-enable --benchmark-only --benchmark-autosave

report: setup
	$(BIN)/suite report $(RESULTS)

# Re-resolve ci/requirements.lock from ci/requirements.in and pyproject.toml.
lock: setup
	$(BIN)/uv pip compile ci/requirements.in pyproject.toml --extra mpi --extra deepspeed --extra fid --extra test --extra logs \
		--python-version 3.11 --python-platform x86_64-unknown-linux-gnu --no-header -o ci/requirements.lock

clean:
	rm -rf results .pytest_cache .benchmarks site

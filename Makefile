# The user's entry point. `make demo` and `make test` do all set-up themselves.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# the install stamp names pyproject.toml's hash: re-install only when it changes
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-16)
MASTER ?=
# sample data and models live in the user cache ($GLM5_RECIPE_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/glm5-recipe;
# `python -m core.cache` prints it): `python -m samples` fills it once, jobs read it from any directory
SAMPLES := $(PY) -m samples
PYTEST_ARGS ?=

.PHONY: help setup sysdeps demo quality-eval data-web spark-web data-swe data-swe-envs swe-real swe-langs data-terminal data-search data-longctx train train-dist train-megatron gpu-check gpu-vendor sft rl-demo post-train-real rl-async test test-slow fuzz chaos load bench bench-gpu lint clean distclean

help:
	@echo "make demo       install into .venv if needed, run the whole recipe on bounded samples -> out/demo (MASTER=local[2] for Spark)"
	@echo "make data-web   web quality filtering of the sample's HTML pages -> out/web (MASTER=local[2] for Spark)"
	@echo "make spark-web  the web job on Spark (local[2]; MASTER=spark://host:7077 for a cluster) -> out/web-spark"
	@echo "make quality-eval  precision/recall of the DCLM classifier and the machine-text detector"
	@echo "make data-swe   issue-PR mining on recorded GitHub data -> out/swe (MASTER=local[2] for Spark)"
	@echo "make data-swe-envs  Docker environments for the mined instances, F2P/P2P -> out/swe_envs"
	@echo "make swe-real   environments + gold evaluation of the 20 real SWE-bench instances in ../shared/swe-real"
	@echo "make swe-langs  environments for Debian upstream projects in 8 languages, parse vs runner summary -> out/bench/swe_langs_debian.json"
	@echo "make data-terminal  convert the Terminal-Bench seeds to Harbor, check oracle/nop over them -> out/terminal/"
	@echo "make data-search  deep-search tasks from the sample's Python docs, BM25 baseline graded -> out/search/"
	@echo "make data-longctx  long-context mid-training shards per stage -> out/longctx/<stage>/"
	@echo "make train      train the tiny GLM-5-shaped model on the demo shards -> out/train/"
	@echo "make train-dist the same with torchrun on NPROC=2 ranks (FSDP2 data + expert parallel) -> out/train-dist/"
	@echo "make train-megatron  the same model and shards trained by Megatron-core (GPTModel, schedules, dist ckpt) -> out/train-megatron/"
	@echo "make gpu-check  on a CUDA machine: Megatron GPTModel vs ours, Megatron training (its experts vs our grouped GEMM), MoE kernels, HF export in vLLM/SGLang -> out/gpu-check/report.json"
	@echo "make gpu-vendor download megatron-core + small deps (py3.12 wheels) into vendor/gpu-wheels for gpu-check"
	@echo "make sft        SFT with the GLM-5 chat template on the sample conversations -> out/sft/"
	@echo "make rl-demo    CPU demo: SFT -> RL on A -> RL on B -> distillation -> out/rl_demo/curves.{json,png}"
	@echo "make post-train-real  SmolLM2-135M-Instruct through SFT -> GRPO (3 seeds) -> distillation on real data -> out/post_train_real/summary.json"
	@echo "make rl-async   asynchronous RL: rollout servers, task services, orchestrator, trainer -> out/rl_async/"
	@echo "make test       install into .venv if needed, run the test suite"
	@echo "make test-slow  the slow tests the default run leaves out (minutes each)"
	@echo "make fuzz       long fuzzing of every reader/parser -> one reliability table (out/reliability/fuzz.md)"
	@echo "make chaos      long LLM-fault, hostile-suite and SIGKILL-resume runs -> one table (out/reliability/chaos.md)"
	@echo "make load       the web job on ~12,900 distinct real pages (WARC), 55 environments validated in one run: peak RSS/disk -> out/reliability/load.md"
	@echo "make bench      benchmarks (ratios against named baselines) -> out/bench/*.json + one table"
	@echo "make bench-gpu  MoE kernels on a CUDA GPU: correctness + timings -> out/bench/kernels_gpu.json"
	@echo "make lint       ruff"
	@echo "make clean      remove out/ and build caches (keeps .venv and the sample/model cache: python -m core.cache)"

setup: sysdeps $(STAMP)

# System packages the suite needs on a fresh Debian 12 (as root): a JRE for Spark, venv, and the jail
# for untrusted code (bubblewrap + libseccomp: core/jail.py decides, installs and probes; stdlib only)
sysdeps:
	@$(PYTHON) -m core.jail setup || true
	@if ! command -v java >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing a Java runtime for Spark (openjdk-17-jre-headless)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	  else echo "warning: no java on PATH; Spark jobs and tests need Java 17" >&2; fi; \
	fi

$(STAMP): pyproject.toml
	@if [ ! -x $(PY) ]; then \
	  rm -rf $(VENV); \
	  $(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	    rm -rf $(VENV); \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; fi; \
	    $(PYTHON) -m venv $(VENV); }; \
	fi
	$(PY) -m pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

# the whole recipe on bounded samples: pipelines/jobs/demo.py
demo: setup
	$(SAMPLES) demo
	$(PY) -m pipelines demo --config configs/demo.yaml $(if $(MASTER),--master '$(MASTER)')

# web quality filtering (heuristics, language, DCLM top-p%, LLM edu scoring, AI/template exclusion)
# over the sample's HTML pages; the LLM is SmolLM2 behind our own OpenAI-compatible server
# (the job: pipelines/jobs/web.py)
data-web: setup
	$(SAMPLES) corpus
	$(PY) -m pipelines web --config configs/web.yaml --input "$$($(SAMPLES) corpus --print html)" \
	  --glob '*.html' --source python-docs --output out/web $(if $(MASTER),--master '$(MASTER)')
	$(PY) -m pipelines report out/web

# the same web job on Spark: local[2] by default, MASTER=spark://host:7077 for a cluster
spark-web: setup
	$(SAMPLES) corpus
	$(PY) -m pipelines web --config configs/web.yaml --input "$$($(SAMPLES) corpus --print html)" \
	  --glob '*.html' --source python-docs --output $(CURDIR)/out/web-spark --master '$(or $(MASTER),local[2])'
	$(PY) -m pipelines report out/web-spark

# held-out precision/recall of the DCLM classifier and the machine-text detector on the sample
# (pipelines/jobs/quality_eval.py)
quality-eval: setup
	$(SAMPLES) corpus
	$(PY) -m pipelines quality-eval

# issue–PR mining on real recorded GitHub API responses + events built from them + sample clones
data-swe: setup
	$(SAMPLES) swe-mine
	$(PY) -m pipelines swe-mine --config configs/swe_mine.yaml --events "$$($(SAMPLES) swe-mine --print events)" \
	  --api "$$($(SAMPLES) swe-mine --print api)" --repos "$$($(SAMPLES) swe-mine --print repos)" \
	  --output out/swe --overwrite $(if $(MASTER),--master '$(MASTER)')

# Dockerized SWE environments for the mined instances: one image per repo-version, tests run before
# and after each fix -> out/swe_envs/ (validated.jsonl, failures.jsonl, environments.jsonl, summary.json)
data-swe-envs: setup
	@test -f out/swe/instances.jsonl || $(MAKE) data-swe
	$(PY) -m swe_envs setup-docker
	$(PY) -m swe_envs validate --config configs/swe_envs.yaml --instances out/swe/instances.jsonl \
	  --repos "$$($(SAMPLES) swe-mine --print repos)" --output out/swe_envs --overwrite

# the 20 real SWE-bench Verified instances (../shared/swe-real, git bundles as --repos) with the shipped
# defaults: validate + evaluate --predictions gold -> out/bench/swe_real.json (gold lists reproduced, s/bytes per env)
swe-real: setup
	$(PY) -m swe_envs setup-docker
	$(PY) benchmarks/swe_real.py

# 8 languages on real code: Debian source packages (apt-get source, cached in the cache's debian-src/) built
# with the shipped defaults, tests run once, parsed counts vs the runner's summary (LANGS="go,c" for some)
swe-langs: setup
	$(PY) -m swe_envs setup-docker
	$(PY) benchmarks/swe_langs_debian.py $(if $(LANGS),--only '$(LANGS)')

# Terminal-Bench seeds (../shared/terminal-seeds/*.tgz, or TERMINAL_SEEDS=DIR of them) -> Harbor tasks,
# then build + oracle + nop per task through image substitution (long: hours for all 320 on 2 cores);
# the seeds are extracted into the cache's terminal-seeds/
TERMINAL_SEEDS ?= ../shared/terminal-seeds
TERMINAL_WORKERS ?= 2
data-terminal: setup
	$(PY) -m swe_envs setup-docker
	seeds="$$($(PY) -m swe_envs.terminal.seeds $(TERMINAL_SEEDS))" \
	  && $(PY) -m swe_envs terminal convert --input "$$seeds" --output out/terminal/harbor --overwrite
	$(PY) -m swe_envs terminal check --tasks out/terminal/harbor --output out/terminal/check \
	  --workers $(TERMINAL_WORKERS) --config configs/terminal.yaml --resume

# deep-search tasks over the sample's Python documentation (HTML + links), kept only when SmolLM2 fails them
# closed-book; graded with the dense solver (independent of the checks that kept them), then the BM25 one
data-search: setup
	$(SAMPLES) corpus
	mkdir -p out/search && $(SAMPLES) corpus --print html > out/search/docs_dir
	$(PY) -m synth.search generate --corpus "$$(cat out/search/docs_dir)" --n 20 --out out/search/tasks.jsonl \
	  --config configs/terminal_search.yaml
	$(PY) -m synth.search solve --tasks out/search/tasks.jsonl --corpus "$$(cat out/search/docs_dir)" --out out/search/dense.jsonl
	$(PY) -m synth.search grade --tasks out/search/tasks.jsonl --responses out/search/dense.jsonl
	@echo "(the BM25 tool solver decided which tasks to keep; graded for reference, 1.0 by construction)"
	$(PY) -m synth.search solve --solver bm25 --tasks out/search/tasks.jsonl --corpus "$$(cat out/search/docs_dir)" --out out/search/bm25.jsonl
	$(PY) -m synth.search grade --tasks out/search/tasks.jsonl --responses out/search/bm25.jsonl

# long-context mid-training data: the demo's documents + tokenizer -> out/longctx/<stage>/
# (the job: pipelines/jobs/longctx.py)
# (the demo runs first when its tokenizer, written after its documents, is missing)
out/demo/tokenizer/tokenizer.json:
	$(MAKE) demo

data-longctx: setup out/demo/tokenizer/tokenizer.json
	$(PY) -m pipelines longctx --config configs/longctx.yaml

# the tiny GLM-5-shaped model (MLA, MoE, MTP, MuonSplit) on the demo shards; runs the demo first if needed
train: setup
	@test -f out/demo/shards/manifest.json || $(MAKE) demo
	$(PY) -m training.trainer --config configs/train_tiny.yaml --shards out/demo/shards \
	  --metrics out/train/metrics.jsonl --checkpoint-dir out/train/ckpt

# the same model data + expert parallel over NPROC torchrun ranks (gloo on CPU, NCCL on GPUs)
NPROC ?= 2
train-dist: setup
	@test -f out/demo/shards/manifest.json || $(MAKE) demo
	$(PY) -m torch.distributed.run --standalone --nproc-per-node $(NPROC) -m training.trainer \
	  --config configs/train_dist.yaml --shards out/demo/shards \
	  --metrics out/train-dist/metrics.jsonl --checkpoint-dir out/train-dist/ckpt

# the same YAML and demo shards through Megatron-core (its GPTModel, schedule, DDP, optimizer wrapper,
# dist_checkpointing; gloo on CPU) -> out/train-megatron/metrics.jsonl
train-megatron: setup
	@test -f out/demo/shards/manifest.json || $(MAKE) demo
	$(PY) -m training.megatron --config configs/train_tiny.yaml --shards out/demo/shards \
	  --metrics out/train-megatron/metrics.jsonl --checkpoint-dir out/train-megatron/ckpt

# one call on a CUDA machine that reaches no registry (python3.12 + torch + triton there): Megatron's
# GPTModel vs ours, Megatron training, the MoE kernels, an inference engine -> out/gpu-check/report.json;
# exits 2 ("skipped") without CUDA.
# `make gpu-vendor` (here) first fills vendor/gpu-wheels, which travels with the tree.
GPU_PY ?= $(if $(wildcard $(PY)),$(PY),python3)
gpu-check:
	$(GPU_PY) -m training.tools.gpu_check out/gpu-check/report.json

gpu-vendor: setup
	$(PY) -m training.tools.gpu_check vendor

# SFT on the bundled sample conversations (chat / reasoning / coding-agent), trained by training.trainer
sft: setup
	$(PY) -m training.sft --config configs/sft_tiny.yaml --out out/sft

# the post-training demonstration (measured, a few CPU minutes): reward curves per stage
rl-demo: setup
	rm -rf out/rl_demo
	$(PY) -m training.rl demo --out out/rl_demo

# a real model through the post-training recipe on CPU (~30-40 min on 2 cores): benchmarks/post_train_real.py
post-train-real: setup
	$(PY) benchmarks/post_train_real.py --out out/post_train_real

rl-async: setup
	rm -rf out/rl_async
	$(PY) -m training.rl train --config configs/rl_async_tiny.yaml --out out/rl_async

# the whole suite, Spark tests included (markers: spark, docker, gpu — gpu skips without CUDA)
test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

# the slow tests the default run leaves out (minutes each: Megatron TP/resume, a web job on real WARCs,
# every Harbor-native fixture through Docker, an instance-layer refine, an imported checkpoint training)
test-slow: setup
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

# reliability (tests/reliability): the same properties CI checks with few seeded examples, run long;
# each prints one table per area: inputs tried, faults injected, records lost, escapes
fuzz: setup
	RELIABILITY_LONG=1 RELIABILITY_TABLE=out/reliability/fuzz.json $(PY) -m pytest -q \
	  tests/reliability/test_fuzz_readers.py tests/reliability/test_fuzz_mining.py \
	  tests/reliability/test_fuzz_log_parsers.py tests/reliability/test_fuzz_harbor.py \
	  tests/reliability/test_fuzz_chat.py tests/reliability/test_fuzz_git.py

chaos: setup
	RELIABILITY_LONG=1 RELIABILITY_TABLE=out/reliability/chaos.json $(PY) -m pytest -q \
	  tests/reliability/test_bad_records.py tests/reliability/test_chaos_llm.py \
	  tests/reliability/test_containment.py tests/reliability/test_containment_parsers.py \
	  tests/reliability/test_containment_terminal.py tests/reliability/test_containment_sessions.py \
	  tests/reliability/test_kill_resume*.py

# load: the web job on ~12,900 distinct real pages (samples web-volume), then `swe_envs validate` of 55
# repo-versions in one run; peak RSS of each job's process tree, output disk, engine growth
load: setup
	RELIABILITY_LONG=1 RELIABILITY_TABLE=out/reliability/load.json $(PY) -m pytest -q -s tests/reliability/test_load.py

# every benchmarks/*.py, one at a time (BENCH="minhash,sampler" for some), each writing
# out/bench/<script>.json; then one table of all, also written into README.md's benchmark table
# (benchmarks/_report.py --markdown); exits 0 whether or not goals hold
bench: setup
	$(PY) benchmarks/run_all.py --readme README.md $(if $(BENCH),--only '$(BENCH)')

# the Triton MoE kernels at GLM-5 shapes (needs CUDA; exits 2 with a "skipped" JSON without it)
bench-gpu: setup
	$(PY) benchmarks/kernels_gpu.py out/bench/kernels_gpu.json

lint: setup
	$(PY) -m ruff check .

clean:
	rm -rf out .pytest_cache .ruff_cache spark-warehouse
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

# the sample/model cache is the user's (shared by checkouts): named, not removed
distclean: clean
	rm -rf $(VENV)
	@echo "kept the sample/model cache: $$($(PYTHON) -m core.cache) (remove it by hand to fetch everything again)"

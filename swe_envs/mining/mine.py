"""The miner as an engine runs it: ``engine.run(Mining(units, out, cfg, index))``.

Every stage over the input units into OUT (``documents/``, ``rejects/``, ``instances.jsonl``,
``work/``), returning the stats the job's accounting needs. Its two implementations sit side by
side and must give identical outputs: DuckDB over the local engine's worker processes
(``engine_duckdb``), DataFrames on the Spark engine (``engine_spark``). The job never asks which.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.local_engine import LocalEngine
from core.spark_engine import SparkEngine
from swe_envs.mining.config import MiningConfig
from swe_envs.mining.decontam import BenchmarkIndex
from swe_envs.mining.engine_duckdb import run_duckdb
from swe_envs.mining.engine_spark import run_spark_mine
from swe_envs.mining.stages import MineUnit


@dataclass
class Mining:
    units: list[MineUnit]
    out: Path
    cfg: MiningConfig
    index: BenchmarkIndex | None
    # pairs per task of the local per-pair stages (one repository's pairs stay together)
    chunk_pairs: int = 32
    progress: bool = False  # progress bars (the local engine's)

    def local(self, engine: LocalEngine) -> dict[str, Any]:
        return run_duckdb(self.units, self.out, self.cfg, self.index, engine, self.chunk_pairs, self.progress)

    def spark(self, engine: SparkEngine) -> dict[str, Any]:
        return run_spark_mine(self.units, self.out, self.cfg, self.index, engine)

# Everything under the guard: vLLM with tensor_parallel_size > 1 starts its workers with
# multiprocessing's spawn, which runs this file again (as __mp_main__, without the snakemake object).
if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821 (snakemake object)
    from radrank import jobs  # noqa: E402

    jobs.run_script(snakemake, jobs.ScoreGroup)  # noqa: F821

# A stage of MRScore training in its own environment (rules/mrscore.smk): params.stage names the job type.
if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821 (snakemake object)
    from radrank import jobs, mrscore_jobs  # noqa: E402

    jobs.run_script(snakemake, mrscore_jobs.JOB_TYPES[snakemake.params.stage])  # noqa: F821

from swe_envs.cli import app

if __name__ == "__main__":
    app()

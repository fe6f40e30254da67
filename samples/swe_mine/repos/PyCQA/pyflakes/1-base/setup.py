from setuptools import setup
setup(name='pyflakes')

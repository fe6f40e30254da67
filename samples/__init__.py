"""Builders of the sample data the demo, the tests and the benchmarks run on.

They live outside the product packages: each turns stand-in sources kept here as files (or
real data fetched once through package managers) into the inputs a job reads.
"""

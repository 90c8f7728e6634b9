"""Local only: the embedded AWS emulator, what it emulates that moto lacks, and `dispatcher local`.

Never in the Lambda artifact (the build drops this folder), and never imported by a
shipped module: it needs the ``local`` extra (moto, its server).
"""

"""A GPU machine lent for minutes, without network or dvc (docs/gpu.md): the grid its calls train in a fixed wall
time, and the results page written back here from what they returned. The script that runs there, and the folder
it carries, are tools/gpu_check.sh and tools/gpu_bundle.py."""

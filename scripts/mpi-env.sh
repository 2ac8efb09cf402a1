# Sourced by the scripts: lets Open MPI run as root (containers, CI). Runs with more ranks than
# cores also need --oversubscribe on the mpirun command line.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

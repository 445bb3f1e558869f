// mirage_xdsl device library: the one header generated kernels include.
#pragma once
#include "core.cuh"
#include "copy.cuh"
#include "compute.cuh"
#include "mma.cuh"
#include "grid.cuh"
#include "dependent_launch.cuh"

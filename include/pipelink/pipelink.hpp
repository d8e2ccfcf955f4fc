#pragma once
// Umbrella header.
#include "pipelink/contract.hpp"
#include "pipelink/debug.hpp"
#include "pipelink/dtype.hpp"
#include "pipelink/error.hpp"
#include "pipelink/graph.hpp"
#include "pipelink/npy.hpp"
#include "pipelink/ops/aggregate.hpp"
#include "pipelink/ops/image.hpp"
#include "pipelink/ops/reference.hpp"
#include "pipelink/registry.hpp"
#include "pipelink/tensor.hpp"
#include "pipelink/verify.hpp"

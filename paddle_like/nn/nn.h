// Everything a model author needs from the layer library: modules and every layer,
// the losses and metrics. Include this one header in model code.
#ifndef PADDLE_LIKE_NN_NN_H_
#define PADDLE_LIKE_NN_NN_H_

#include "paddle_like/nn/activations.h"
#include "paddle_like/nn/conv2d.h"
#include "paddle_like/nn/dropout.h"
#include "paddle_like/nn/elementwise_ops.h"
#include "paddle_like/nn/embedding.h"
#include "paddle_like/nn/functional.h"
#include "paddle_like/nn/init.h"
#include "paddle_like/nn/linear.h"
#include "paddle_like/nn/losses.h"
#include "paddle_like/nn/metrics.h"
#include "paddle_like/nn/module.h"
#include "paddle_like/nn/normalization.h"
#include "paddle_like/nn/pool2d.h"
#include "paddle_like/nn/reductions.h"
#include "paddle_like/nn/shape_ops.h"
#include "paddle_like/nn/sparse_table.h"

#endif  // PADDLE_LIKE_NN_NN_H_

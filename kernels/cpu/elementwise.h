// CPU elementwise ops, reductions and dtype casts (kernels/ops.h).
#pragma once
#include "core/tensor.h"

namespace veomni::ops::cpu {

double sum(const Tensor& x);
double sum_squares(const Tensor& x);
void add_(Tensor& dst, const Tensor& src, float alpha);
void scale_(Tensor& x, float factor);
void fill_(Tensor& x, float value);
void cast(const Tensor& src, Tensor& dst);

}  // namespace veomni::ops::cpu

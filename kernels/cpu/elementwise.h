// CPU elementwise ops, reductions and dtype casts (kernels/ops.h).
#pragma once
#include <vector>

#include "core/tensor.h"

namespace veomni::ops::cpu {

double sum(const Tensor& x);
double sum_squares(const Tensor& x);
void add_(Tensor& dst, const Tensor& src, float alpha);
void scale_(Tensor& x, float factor);
void fill_(Tensor& x, float value);
void cast(const Tensor& src, Tensor& dst);
double sum_squares_multi(const std::vector<const Tensor*>& xs);
void cast_multi(const std::vector<const Tensor*>& src, const std::vector<Tensor*>& dst);

}  // namespace veomni::ops::cpu

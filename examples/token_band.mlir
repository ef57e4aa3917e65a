// A tiny token classifier in StableHLO, one SGD step per call (infeed's
// examples/train_lm.rs and tests/programs/xla/train.rs). `$B` and `$L` are replaced by
// the batch size and padded length of each batch shape: one compile per shape.
//
// Task: for every real token (mask = input_ids_mask * attention_mask), predict
// whether its id lies in [12500, 37500) — the middle half of the ids of
// testdata/lm-sample — from x = id / 50000 through a 1 -> 16 (tanh) -> 1 MLP.
// Loss: masked mean binary cross-entropy. Returns the new parameters (kept on
// the device by the caller) and the loss of the parameters it was given.
func.func @main(%w1: tensor<16xf32>, %b1: tensor<16xf32>, %w2: tensor<16xf32>, %b2: tensor<f32>,
                %ids: tensor<$Bx$Lxi32>, %idmask: tensor<$Bx$Lxi32>, %attn: tensor<$Bx$Lxi32>)
    -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>) {
  // Mask: real tokens only.
  %mi = stablehlo.multiply %idmask, %attn : tensor<$Bx$Lxi32>
  %m = stablehlo.convert %mi : (tensor<$Bx$Lxi32>) -> tensor<$Bx$Lxf32>
  // Input feature and label.
  %idf = stablehlo.convert %ids : (tensor<$Bx$Lxi32>) -> tensor<$Bx$Lxf32>
  %scale = stablehlo.constant dense<2.0e-05> : tensor<$Bx$Lxf32>
  %x = stablehlo.multiply %idf, %scale : tensor<$Bx$Lxf32>
  %lo = stablehlo.constant dense<12500> : tensor<$Bx$Lxi32>
  %hi = stablehlo.constant dense<37500> : tensor<$Bx$Lxi32>
  %ge = stablehlo.compare GE, %ids, %lo, SIGNED : (tensor<$Bx$Lxi32>, tensor<$Bx$Lxi32>) -> tensor<$Bx$Lxi1>
  %lt = stablehlo.compare LT, %ids, %hi, SIGNED : (tensor<$Bx$Lxi32>, tensor<$Bx$Lxi32>) -> tensor<$Bx$Lxi1>
  %inband = stablehlo.and %ge, %lt : tensor<$Bx$Lxi1>
  %y = stablehlo.convert %inband : (tensor<$Bx$Lxi1>) -> tensor<$Bx$Lxf32>
  // Forward: h = tanh(x * w1 + b1), z = h . w2 + b2.
  %xb = stablehlo.broadcast_in_dim %x, dims = [0, 1] : (tensor<$Bx$Lxf32>) -> tensor<$Bx$Lx16xf32>
  %w1b = stablehlo.broadcast_in_dim %w1, dims = [2] : (tensor<16xf32>) -> tensor<$Bx$Lx16xf32>
  %b1b = stablehlo.broadcast_in_dim %b1, dims = [2] : (tensor<16xf32>) -> tensor<$Bx$Lx16xf32>
  %a0 = stablehlo.multiply %xb, %w1b : tensor<$Bx$Lx16xf32>
  %a = stablehlo.add %a0, %b1b : tensor<$Bx$Lx16xf32>
  %h = stablehlo.tanh %a : tensor<$Bx$Lx16xf32>
  %hw = stablehlo.dot_general %h, %w2, contracting_dims = [2] x [0] : (tensor<$Bx$Lx16xf32>, tensor<16xf32>) -> tensor<$Bx$Lxf32>
  %b2b = stablehlo.broadcast_in_dim %b2, dims = [] : (tensor<f32>) -> tensor<$Bx$Lxf32>
  %z = stablehlo.add %hw, %b2b : tensor<$Bx$Lxf32>
  // Loss: max(z, 0) - z y + log(1 + exp(-|z|)), masked mean.
  %zero = stablehlo.constant dense<0.0> : tensor<$Bx$Lxf32>
  %relu = stablehlo.maximum %z, %zero : tensor<$Bx$Lxf32>
  %zy = stablehlo.multiply %z, %y : tensor<$Bx$Lxf32>
  %absz = stablehlo.abs %z : tensor<$Bx$Lxf32>
  %nabs = stablehlo.negate %absz : tensor<$Bx$Lxf32>
  %e = stablehlo.exponential %nabs : tensor<$Bx$Lxf32>
  %softplus = stablehlo.log_plus_one %e : tensor<$Bx$Lxf32>
  %t0 = stablehlo.subtract %relu, %zy : tensor<$Bx$Lxf32>
  %t = stablehlo.add %t0, %softplus : tensor<$Bx$Lxf32>
  %tm = stablehlo.multiply %t, %m : tensor<$Bx$Lxf32>
  %fzero = stablehlo.constant dense<0.0> : tensor<f32>
  %lsum = stablehlo.reduce(%tm init: %fzero) applies stablehlo.add across dimensions = [0, 1] : (tensor<$Bx$Lxf32>, tensor<f32>) -> tensor<f32>
  %msum = stablehlo.reduce(%m init: %fzero) applies stablehlo.add across dimensions = [0, 1] : (tensor<$Bx$Lxf32>, tensor<f32>) -> tensor<f32>
  %fone = stablehlo.constant dense<1.0> : tensor<f32>
  %count = stablehlo.maximum %msum, %fone : tensor<f32>
  %loss = stablehlo.divide %lsum, %count : tensor<f32>
  // Backward.
  %p = stablehlo.logistic %z : tensor<$Bx$Lxf32>
  %pmy = stablehlo.subtract %p, %y : tensor<$Bx$Lxf32>
  %dzm = stablehlo.multiply %pmy, %m : tensor<$Bx$Lxf32>
  %countb = stablehlo.broadcast_in_dim %count, dims = [] : (tensor<f32>) -> tensor<$Bx$Lxf32>
  %dz = stablehlo.divide %dzm, %countb : tensor<$Bx$Lxf32>
  %db2 = stablehlo.reduce(%dz init: %fzero) applies stablehlo.add across dimensions = [0, 1] : (tensor<$Bx$Lxf32>, tensor<f32>) -> tensor<f32>
  %dw2 = stablehlo.dot_general %dz, %h, contracting_dims = [0, 1] x [0, 1] : (tensor<$Bx$Lxf32>, tensor<$Bx$Lx16xf32>) -> tensor<16xf32>
  %dzb = stablehlo.broadcast_in_dim %dz, dims = [0, 1] : (tensor<$Bx$Lxf32>) -> tensor<$Bx$Lx16xf32>
  %w2b = stablehlo.broadcast_in_dim %w2, dims = [2] : (tensor<16xf32>) -> tensor<$Bx$Lx16xf32>
  %dh = stablehlo.multiply %dzb, %w2b : tensor<$Bx$Lx16xf32>
  %hh = stablehlo.multiply %h, %h : tensor<$Bx$Lx16xf32>
  %ones = stablehlo.constant dense<1.0> : tensor<$Bx$Lx16xf32>
  %dtanh = stablehlo.subtract %ones, %hh : tensor<$Bx$Lx16xf32>
  %da = stablehlo.multiply %dh, %dtanh : tensor<$Bx$Lx16xf32>
  %db1 = stablehlo.reduce(%da init: %fzero) applies stablehlo.add across dimensions = [0, 1] : (tensor<$Bx$Lx16xf32>, tensor<f32>) -> tensor<16xf32>
  %dw1 = stablehlo.dot_general %da, %x, contracting_dims = [0, 1] x [0, 1] : (tensor<$Bx$Lx16xf32>, tensor<$Bx$Lxf32>) -> tensor<16xf32>
  // SGD, learning rate 1.
  %lr = stablehlo.constant dense<1.0> : tensor<16xf32>
  %lr0 = stablehlo.constant dense<1.0> : tensor<f32>
  %s1 = stablehlo.multiply %dw1, %lr : tensor<16xf32>
  %w1n = stablehlo.subtract %w1, %s1 : tensor<16xf32>
  %s2 = stablehlo.multiply %db1, %lr : tensor<16xf32>
  %b1n = stablehlo.subtract %b1, %s2 : tensor<16xf32>
  %s3 = stablehlo.multiply %dw2, %lr : tensor<16xf32>
  %w2n = stablehlo.subtract %w2, %s3 : tensor<16xf32>
  %s4 = stablehlo.multiply %db2, %lr0 : tensor<f32>
  %b2n = stablehlo.subtract %b2, %s4 : tensor<f32>
  return %w1n, %b1n, %w2n, %b2n, %loss : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>
}

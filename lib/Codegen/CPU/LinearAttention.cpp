//===- LinearAttention.cpp - the O(N·d·dv) kernelised form ----------------===//
//
// See LinearAttention.h for the math. Memory beyond the ABI buffers: the
// F×dv state (F = d, or 2d with a cosformer phase), two kLinearChunk×F feature
// scratches and, in backward, two per-query coefficient vectors: O(N + d·dv).
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/CPU/LinearAttention.h"

#include "lib/Codegen/CPU/ScalarOps.h"
#include "lib/Codegen/RowAlgorithm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

namespace {

// Reassociation lets LLVM vectorise the dot-product and axpy loops over d and
// dv (and contract their multiply-adds into FMAs).
class LinearCodegen : ScalarOps {
public:
  LinearCodegen(ImplicitLocOpBuilder &b, const LinearForm &form)
      : ScalarOps(b, form.type, arith::FastMathFlags::reassoc | arith::FastMathFlags::contract),
        form(form), math(form.math), rows(b, form.math) {}

  void forward(const ForwardArgs &args);
  void backward(const BackwardArgs &args);

private:
  // --- small builders (and those of ScalarOps) ---------------------------------
  Value div(Value x, Value y) { return arith::DivFOp::create(b, x, y); }
  Value addIndex(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value subIndex(Value x, Value y) { return arith::SubIOp::create(b, x, y); }
  Value minIndex(Value x, Value y) { return arith::MinSIOp::create(b, x, y); }
  void forEach(Value lb, Value ub, function_ref<void(Value)> body, Value step = {}) {
    loop(
        lb, ub, {},
        [&](Value iv, ValueRange) -> SmallVector<Value> {
          body(iv);
          return {};
        },
        step);
  }
  /// Σ_{c < n} term(c).
  Value sum(Value n, function_ref<Value(Value)> term, Value init = {}) {
    return loop(
        index(0), n, {init ? init : constant(0.0)},
        [&](Value c, ValueRange acc) -> SmallVector<Value> { return {add(acc[0], term(c))}; })[0];
  }
  void whenTrue(Value cond, function_ref<void()> body) {
    auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    body();
  }
  void eitherWay(Value cond, function_ref<void()> thenBody, function_ref<void()> elseBody) {
    buildBranch(
        b, cond, {},
        [&]() -> SmallVector<Value> {
          thenBody();
          return {};
        },
        [&]() -> SmallVector<Value> {
          elseBody();
          return {};
        });
  }
  Value alloc(ArrayRef<Value> sizes) {
    SmallVector<int64_t> shape(sizes.size(), ShapedType::kDynamic);
    Value buffer =
        memref::AllocOp::create(b, MemRefType::get(shape, type), sizes, b.getI64IntegerAttr(64));
    buffers.push_back(buffer);
    return buffer;
  }
  Value zeroed(ArrayRef<Value> sizes) {
    Value buffer = alloc(sizes);
    fillZero(buffer);
    return buffer;
  }
  void fillZero(Value buffer) {
    Value zero = constant(0.0);
    if (cast<MemRefType>(buffer.getType()).getRank() == 1) {
      forEach(index(0), dim(buffer, 0), [&](Value r) { store(zero, buffer, {r}); });
      return;
    }
    forEach(index(0), dim(buffer, 0), [&](Value r) {
      forEach(index(0), dim(buffer, 1), [&](Value c) { store(zero, buffer, {r, c}); });
    });
  }
  void freeBuffers() {
    for (Value buffer : buffers)
      memref::DeallocOp::create(b, buffer);
    buffers.clear();
  }

  // --- the linear form ------------------------------------------------------
  /// Sizes, coefficients a, b (g = a·s, h = b·s) and the query feature scale.
  void setUp(Value q, Value v);
  /// (cos, sin) of the query phase A_i = x(i, 0) − x(0, 0) or the key phase B_j = x(0, j).
  std::pair<Value, Value> queryPhase(Value i) {
    Value angle = sub(math.phase(i, index(0)), math.phase(index(0), index(0)));
    return {math::CosOp::create(b, angle), math::SinOp::create(b, angle)};
  }
  std::pair<Value, Value> keyPhase(Value j) {
    Value angle = math.phase(index(0), j);
    return {math::CosOp::create(b, angle), math::SinOp::create(b, angle)};
  }
  /// Writes u_i into row i - base of `rows` for i in [begin, end).
  void fillQueries(Value q, Value begin, Value end, Value base);
  /// Writes w_j into row j - base of `rows` for j in [begin, end).
  void fillKeys(Value k, Value begin, Value end, Value base);
  /// state += Σ_j w_j v_jᵀ, sum += Σ_j w_j over keys [begin, end) (features in kf
  /// rows j - base).
  void absorbKeys(Value v, Value begin, Value end, Value base);
  /// state += Σ_i u_i (coefN_i dO_i)ᵀ, sum += Σ_i u_i coefH_i over queries
  /// [begin, end) (features in qf rows i - base).
  void absorbQueries(Value dOut, Value begin, Value end, Value base);
  /// Keys the row i sees: min(kvEnd, i + 1) when causal, else kvEnd.
  Value keyCount(Value i, bool causal) {
    return causal ? KeyBounds{form.kvEnd, form.isCausal}.causalEnd(b, i) : form.kvEnd;
  }
  /// Forward rows [begin, end) whose features are in qf rows i - begin; causal:
  /// keys [begin, i] come from kf rows j - begin, the earlier ones from the state.
  void forwardRows(Value q, Value v, Value o, Value rowMax, Value rowSum, Value begin, Value end,
                   bool causal);
  /// dq of rows [begin, end) (features in qf, causal intra keys in kf as above),
  /// and their coefN, coefH, and the da, db sums.
  void queryGradients(Value q, Value v, Value o, Value dOut, Value rowSum, Value dq, Value begin,
                      Value end, bool causal);
  /// dk, dv of keys [begin, end) (features in kf); causal: queries [j, queryEnd)
  /// from qf rows i - begin, the later ones from the state.
  void keyGradients(Value k, Value v, Value dOut, Value dk, Value dv, Value begin, Value end,
                    Value queryEnd, bool causal);
  /// Runs `chunk(begin, end)` over [lo, hi) in chunks of kLinearChunk.
  void chunks(Value lo, Value hi, function_ref<void(Value, Value)> chunk) {
    forEach(
        lo, hi,
        [&](Value begin) { chunk(begin, minIndex(addIndex(begin, index(kLinearChunk)), hi)); },
        index(kLinearChunk));
  }

  const LinearForm &form;
  AttentionMath &math;
  RowAlgorithm rows;
  SmallVector<Value> buffers;

  Value headDim, valueDim, features; // d, dv, F
  Value numeratorCoefficient, denominatorCoefficient, queryScale;
  Value state, stateSum; // S [F, dv] and z [F]; backward: P and y
  Value qf, kf;          // [kLinearChunk, F] feature scratches
  Value scratch;         // [F]: du_i or dw_j of the current row
  Value coefN, coefH;    // backward: a/C_i and −b·D_i/C_i per query
  Value paramSums;       // backward: [2] = (da, db)

  /// The coefficients a, b and c of a kernelised kernel are the same for every
  /// pair (its regions read no index: KernelisedAnalysis), so they are evaluated
  /// at indices 0.
  PairIndices anyPair() {
    Value zero = index(0);
    return {zero, zero, zero, zero};
  }
  /// Likewise its row offset is ε or none (no offset region: KernelisedAnalysis).
  RowIndices anyRow() {
    Value zero = index(0);
    return {zero, zero, zero};
  }
};

void LinearCodegen::setUp(Value q, Value v) {
  headDim = dim(q, 1);
  valueDim = dim(v, 1);
  features =
      math.functions().phase ? arith::MulIOp::create(b, headDim, index(2)).getResult() : headDim;
  Value one = constant(1.0), zero = constant(0.0);
  numeratorCoefficient = math.numerator(one, zero, anyPair());
  denominatorCoefficient = math.denominator(one, zero, anyPair());
  queryScale = form.scale;
  if (math.functions().score) // mod = c·s
    queryScale = mul(queryScale, math.score(PairValues{one, anyPair(), Value()}));
  Value chunk = index(kLinearChunk);
  state = zeroed({features, valueDim});
  stateSum = zeroed({features});
  qf = alloc({chunk, features});
  kf = alloc({chunk, features});
  scratch = alloc({features});
}

void LinearCodegen::fillQueries(Value q, Value begin, Value end, Value base) {
  forEach(begin, end, [&](Value i) {
    Value r = subIndex(i, base);
    std::pair<Value, Value> phase;
    if (math.functions().phase)
      phase = queryPhase(i);
    forEach(index(0), headDim, [&](Value c) {
      Value u = mul(math.feature(load(q, {i, c})), queryScale);
      if (!math.functions().phase)
        return store(u, qf, {r, c});
      store(mul(u, phase.first), qf, {r, c});
      store(mul(u, phase.second), qf, {r, addIndex(c, headDim)});
    });
  });
}

void LinearCodegen::fillKeys(Value k, Value begin, Value end, Value base) {
  forEach(begin, end, [&](Value j) {
    Value r = subIndex(j, base);
    std::pair<Value, Value> phase;
    if (math.functions().phase)
      phase = keyPhase(j);
    forEach(index(0), headDim, [&](Value c) {
      Value w = math.feature(load(k, {j, c}));
      if (!math.functions().phase)
        return store(w, kf, {r, c});
      // cos(A + B) = cos A cos B − sin A sin B: the minus goes to the key side.
      store(mul(w, phase.first), kf, {r, c});
      store(arith::NegFOp::create(b, mul(w, phase.second)), kf, {r, addIndex(c, headDim)});
    });
  });
}

void LinearCodegen::absorbKeys(Value v, Value begin, Value end, Value base) {
  forEach(begin, end, [&](Value j) {
    Value r = subIndex(j, base);
    forEach(index(0), features, [&](Value f) {
      Value w = load(kf, {r, f});
      accumulate(stateSum, {f}, w);
      forEach(index(0), valueDim, [&](Value c) {
        accumulate(state, {f, c}, mul(w, load(v, {j, c})));
      });
    });
  });
}

void LinearCodegen::absorbQueries(Value dOut, Value begin, Value end, Value base) {
  forEach(begin, end, [&](Value i) {
    Value r = subIndex(i, base);
    Value n = load(coefN, {i}), h = load(coefH, {i});
    forEach(index(0), features, [&](Value f) {
      Value u = load(qf, {r, f});
      accumulate(stateSum, {f}, mul(u, h));
      Value un = mul(u, n);
      forEach(index(0), valueDim, [&](Value c) {
        accumulate(state, {f, c}, mul(un, load(dOut, {i, c})));
      });
    });
  });
}

void LinearCodegen::forwardRows(Value q, Value v, Value o, Value rowMax, Value rowSum, Value begin,
                                Value end, bool causal) {
  Value zero = constant(0.0);
  forEach(begin, end, [&](Value i) {
    Value r = subIndex(i, begin);
    forEach(index(0), valueDim, [&](Value c) { store(zero, o, {i, c}); });
    // Earlier keys through the state: o_i = u_iᵀ S, H_i = u_i·z.
    Value h = sum(features, [&](Value f) {
      Value u = load(qf, {r, f});
      forEach(index(0), valueDim, [&](Value c) {
        accumulate(o, {i, c}, mul(u, load(state, {f, c})));
      });
      return mul(u, load(stateSum, {f}));
    });
    Value count = keyCount(i, causal);
    if (causal) // the row's own chunk, pair by pair
      h = loop(begin, count, {h}, [&](Value j, ValueRange acc) -> SmallVector<Value> {
        Value s = sum(features, [&](Value f) {
          return mul(load(qf, {r, f}), load(kf, {subIndex(j, begin), f}));
        });
        forEach(index(0), valueDim, [&](Value c) {
          accumulate(o, {i, c}, mul(s, load(v, {j, c})));
        });
        return {add(acc[0], s)};
      })[0];
    // C_i = ε + b·H_i | c | count, O_i = a·u_iᵀ S_i / C_i: the row's state is its
    // sums over every key at once (plain: shift 0).
    Value hSum = denominatorCoefficient ? mul(denominatorCoefficient, h) : h;
    RowAlgorithm::RowResult result =
        rows.finalize(RowState{zero, {hSum, Value()}, count}, anyRow(), numeratorCoefficient);
    forEach(index(0), valueDim, [&](Value col) {
      store(mul(load(o, {i, col}), result.outputScale), o, {i, col});
    });
    store(rows.rowMax(result), rowMax, {i});
    store(rows.rowSum(result), rowSum, {i});
  });
}

void LinearCodegen::forward(const ForwardArgs &args) {
  Value q = args.q, k = args.k, v = args.v, o = args.o, rowMax = args.rowMax, rowSum = args.rowSum,
        qBegin = args.qBegin, qEnd = args.qEnd;
  setUp(q, v);
  eitherWay(
      form.isCausal,
      [&] {
        // State of the keys before the first row, then chunk by chunk: the
        // chunk's rows see the state plus the keys of their own chunk.
        chunks(index(0), minIndex(qBegin, form.kvEnd), [&](Value j0, Value j1) {
          fillKeys(k, j0, j1, j0);
          absorbKeys(v, j0, j1, j0);
        });
        chunks(qBegin, qEnd, [&](Value i0, Value i1) {
          Value keysEnd = minIndex(i1, form.kvEnd);
          fillQueries(q, i0, i1, i0);
          fillKeys(k, i0, keysEnd, i0);
          forwardRows(q, v, o, rowMax, rowSum, i0, i1, /*causal=*/true);
          absorbKeys(v, i0, keysEnd, i0);
        });
      },
      [&] {
        chunks(index(0), form.kvEnd, [&](Value j0, Value j1) {
          fillKeys(k, j0, j1, j0);
          absorbKeys(v, j0, j1, j0);
        });
        chunks(qBegin, qEnd, [&](Value i0, Value i1) {
          fillQueries(q, i0, i1, i0);
          forwardRows(q, v, o, rowMax, rowSum, i0, i1, /*causal=*/false);
        });
      });
  freeBuffers();
}

void LinearCodegen::queryGradients(Value q, Value v, Value o, Value dOut, Value rowSum, Value dq,
                                   Value begin, Value end, bool causal) {
  Value zero = constant(0.0);
  forEach(begin, end, [&](Value i) {
    Value r = subIndex(i, begin);
    Value rowD = sum(valueDim, [&](Value col) {
      return mul(load(dOut, {i, col}), load(o, {i, col}));
    });
    BackwardRow row = rows.prepareBackward(zero, load(rowSum, {i}), rowD);
    // ds_ij = n·(dO_i·v_j) + h for every key j of the row.
    AttentionMath::LinearScoreGrad coefficients =
        math.linearScoreGrad(numeratorCoefficient, denominatorCoefficient, row);
    Value n = coefficients.dPFactor, h = coefficients.offset;
    store(n, coefN, {i});
    store(h, coefH, {i});
    // t = S dO_i: du_i = n·t + h·z, dO_i·N_i = u_i·t, H_i = u_i·z.
    SmallVector<Value> sums{zero, zero};
    ValueRange rowSums =
        loop(index(0), features, sums, [&](Value f, ValueRange acc) -> SmallVector<Value> {
          Value t = sum(valueDim, [&](Value col) {
            return mul(load(state, {f, col}), load(dOut, {i, col}));
          });
          Value z = load(stateSum, {f});
          store(add(mul(n, t), mul(h, z)), scratch, {f});
          Value u = load(qf, {r, f});
          return {add(acc[0], mul(u, t)), add(acc[1], mul(u, z))};
        });
    Value numeratorDot = rowSums[0], hSum = rowSums[1];
    if (causal) {
      ValueRange intra = loop(begin, keyCount(i, true), {numeratorDot, hSum},
                              [&](Value j, ValueRange acc) -> SmallVector<Value> {
                                Value kr = subIndex(j, begin);
                                Value s = sum(features, [&](Value f) {
                                  return mul(load(qf, {r, f}), load(kf, {kr, f}));
                                });
                                Value dOutV = sum(valueDim, [&](Value col) {
                                  return mul(load(dOut, {i, col}), load(v, {j, col}));
                                });
                                Value ds = math.linearScoreGradAt(coefficients, dOutV);
                                forEach(index(0), features, [&](Value f) {
                                  accumulate(scratch, {f}, mul(ds, load(kf, {kr, f})));
                                });
                                return {add(acc[0], mul(s, dOutV)), add(acc[1], s)};
                              });
      numeratorDot = intra[0];
      hSum = intra[1];
    }
    accumulate(paramSums, {index(0)}, math.gradientTerm(numeratorDot, Value(), row));
    accumulate(paramSums, {index(1)}, math.gradientTerm(Value(), hSum, row));
    // u_i = queryScale·φ(q_i)[·(cos A_i, sin A_i)]
    std::pair<Value, Value> phase;
    if (math.functions().phase)
      phase = queryPhase(i);
    forEach(index(0), headDim, [&](Value col) {
      Value du = load(scratch, {col});
      if (math.functions().phase)
        du = add(mul(du, phase.first), mul(load(scratch, {addIndex(col, headDim)}), phase.second));
      store(math.featureGrad(mul(du, queryScale), load(q, {i, col})), dq, {i, col});
    });
  });
}

void LinearCodegen::keyGradients(Value k, Value v, Value dOut, Value dk, Value dv, Value begin,
                                 Value end, Value queryEnd, bool causal) {
  forEach(begin, end, [&](Value j) {
    Value r = subIndex(j, begin);
    // dw_j = P v_j + y, dv_j = Pᵀ w_j
    forEach(index(0), features, [&](Value f) {
      Value pv = sum(valueDim, [&](Value col) {
        return mul(load(state, {f, col}), load(v, {j, col}));
      });
      store(add(pv, load(stateSum, {f})), scratch, {f});
      Value w = load(kf, {r, f});
      forEach(index(0), valueDim, [&](Value col) {
        accumulate(dv, {j, col}, mul(w, load(state, {f, col})));
      });
    });
    if (causal) // the later queries of the key's own chunk, pair by pair
      forEach(j, queryEnd, [&](Value i) {
        Value qr = subIndex(i, begin);
        Value n = load(coefN, {i});
        Value s = sum(features, [&](Value f) { return mul(load(qf, {qr, f}), load(kf, {r, f})); });
        Value dOutV = sum(valueDim, [&](Value col) {
          return mul(load(dOut, {i, col}), load(v, {j, col}));
        });
        Value ds = math.linearScoreGradAt({n, load(coefH, {i})}, dOutV);
        forEach(index(0), features, [&](Value f) {
          accumulate(scratch, {f}, mul(ds, load(qf, {qr, f})));
        });
        Value sn = mul(s, n);
        forEach(index(0), valueDim, [&](Value col) {
          accumulate(dv, {j, col}, mul(sn, load(dOut, {i, col})));
        });
      });
    // w_j = φ(k_j)[·(cos B_j, −sin B_j)]
    std::pair<Value, Value> phase;
    if (math.functions().phase)
      phase = keyPhase(j);
    forEach(index(0), headDim, [&](Value col) {
      Value dw = load(scratch, {col});
      if (math.functions().phase)
        dw = sub(mul(dw, phase.first), mul(load(scratch, {addIndex(col, headDim)}), phase.second));
      store(math.featureGrad(dw, load(k, {j, col})), dk, {j, col});
    });
  });
}

void LinearCodegen::backward(const BackwardArgs &args) {
  Value q = args.q, k = args.k, v = args.v, o = args.o, dOut = args.dOut, rowSum = args.rowSum,
        dq = args.dq, dk = args.dk, dv = args.dv, dParams = args.dParams;
  setUp(q, v);
  Value queries = dim(q, 0);
  coefN = alloc({queries});
  coefH = alloc({queries});
  paramSums = zeroed({index(2)});
  for (Value gradient : {dq, dk, dv})
    fillZero(gradient);

  // dq (and the per-query coefficients) with the key state S, z as in forward;
  // then dk, dv with the query state P, y, suffix sums when causal.
  eitherWay(
      form.isCausal,
      [&] {
        chunks(index(0), queries, [&](Value i0, Value i1) {
          Value keysEnd = minIndex(i1, form.kvEnd);
          fillQueries(q, i0, i1, i0);
          fillKeys(k, i0, keysEnd, i0);
          queryGradients(q, v, o, dOut, rowSum, dq, i0, i1, /*causal=*/true);
          absorbKeys(v, i0, keysEnd, i0);
        });
        fillZero(state);
        fillZero(stateSum);
        // Queries past the last key see every key.
        chunks(form.kvEnd, queries, [&](Value i0, Value i1) {
          fillQueries(q, i0, i1, i0);
          absorbQueries(dOut, i0, i1, i0);
        });
        // Keys j >= Nq are seen by no query (causal, top-left aligned): their dk, dv
        // stay 0, and their k, v (NaN included) are never read.
        Value seenKeys = minIndex(form.kvEnd, queries);
        Value chunk = index(kLinearChunk);
        Value numChunks = arith::CeilDivSIOp::create(b, seenKeys, chunk);
        forEach(index(0), numChunks, [&](Value reversed) {
          Value j0 =
              arith::MulIOp::create(b, subIndex(subIndex(numChunks, index(1)), reversed), chunk);
          Value j1 = minIndex(addIndex(j0, chunk), seenKeys);
          Value queriesEnd = minIndex(j1, queries);
          fillQueries(q, j0, queriesEnd, j0);
          fillKeys(k, j0, j1, j0);
          keyGradients(k, v, dOut, dk, dv, j0, j1, queriesEnd, /*causal=*/true);
          absorbQueries(dOut, j0, queriesEnd, j0);
        });
      },
      [&] {
        chunks(index(0), form.kvEnd, [&](Value j0, Value j1) {
          fillKeys(k, j0, j1, j0);
          absorbKeys(v, j0, j1, j0);
        });
        chunks(index(0), queries, [&](Value i0, Value i1) {
          fillQueries(q, i0, i1, i0);
          queryGradients(q, v, o, dOut, rowSum, dq, i0, i1, /*causal=*/false);
        });
        fillZero(state);
        fillZero(stateSum);
        chunks(index(0), queries, [&](Value i0, Value i1) {
          fillQueries(q, i0, i1, i0);
          absorbQueries(dOut, i0, i1, i0);
        });
        chunks(index(0), form.kvEnd, [&](Value j0, Value j1) {
          fillKeys(k, j0, j1, j0);
          keyGradients(k, v, dOut, dk, dv, j0, j1, Value(), /*causal=*/false);
        });
      });

  // dθ = da·∂a/∂θ + db·∂b/∂θ.
  Value da = load(paramSums, {index(0)}), db = load(paramSums, {index(1)});
  for (unsigned p = 0; p < math.numParams(); ++p)
    store(math.linearParamGrad(p, da, db, anyPair()), dParams, {index(p)});
  freeBuffers();
}

} // namespace

void mlir::attn::buildLinearForward(ImplicitLocOpBuilder &b, const LinearForm &form,
                                    const ForwardArgs &args) {
  LinearCodegen(b, form).forward(args);
}

void mlir::attn::buildLinearBackward(ImplicitLocOpBuilder &b, const LinearForm &form,
                                     const BackwardArgs &args) {
  LinearCodegen(b, form).backward(args);
}

// Real kernel names (demangled by CUPTI/Kineto, up to ~2000 characters) in the report's text, md
// and html: short_signature() keeps them readable and tells a kernel's variants apart.
#include <catch2/catch.hpp>

#include <string>

#include "render.h"

using namespace traintime::report;

namespace {

// Shapes of names recorded on real GPUs (the trace_filter traces of a 128-rank job).
const std::string kCta =
    "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<c10::Half, float, "
    "c10::Half, 2ul, 32>(at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, long>, "
    "at::GenericPackedTensorAccessor<c10::Half, 1ul, at::RestrictPtrTraits, long>, bool, int)";
const std::string kWarp =
    "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_warp_per_row_1<c10::Half, float, "
    "c10::Half, 2ul, 32>(at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, long>, int)";
const std::string kCutlass =
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>(cutlass_80_tensorop_s1688gemm_"
    "128x64_32x6_nt_align1::Params)";

}  // namespace

TEST_CASE("short_signature leaves a name that fits alone") {
  CHECK(short_signature("void permute_pooled_embs_kernel<float>(float const*)", 80) ==
        "void permute_pooled_embs_kernel<float>(float const*)");
  CHECK(short_signature("triton__0d1d2d3", 8) == "t...d2d3");  // a third of the 5 kept from the start
}

TEST_CASE("short_signature drops void and the parameters, then nested and all template arguments") {
  CHECK(short_signature("void permute_pooled_embs_kernel<float>(float const*, long const*, long)", 40) ==
        "permute_pooled_embs_kernel<float>");
  CHECK(short_signature("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 3, 128, "
                        "1>(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned "
                        "int, 128, 1>, int)", 70) ==
        "at::native::(anonymous namespace)::CatArrayBatchedCopy<...>");
  CHECK(short_signature("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
                        100) == "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<...>, at::detail::Array<...> >");
  CHECK(short_signature("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", 61) ==
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t");
}

TEST_CASE("short_signature tells variants apart where only their ends differ") {
  const std::string cta = short_signature(kCta, 61), warp = short_signature(kWarp, 61);
  CHECK(cta == "split_embedding_bac...ad_unweighted_kernel_cta_per_row_1<...>");
  CHECK(warp == "split_embedding_bac...d_unweighted_kernel_warp_per_row_1<...>");
  CHECK(display_width(cta) == 61);
  // A short name ahead of its template arguments keeps them: they are what names the kernel.
  CHECK(short_signature(kCutlass, 61) == "cutlass::Kernel<cut...nsorop_s1688gemm_128x64_32x6_nt_align1>");
}

TEST_CASE("short_signatures keeps template arguments where they are all that tells two names apart") {
  const std::string add =
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
      "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)";
  const std::string fill =
      "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
      "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)";
  CHECK(short_signature(add, 61) == short_signature(fill, 61));  // alone, both fold to <...>
  const auto both = short_signatures({add, fill, kCta, add}, 61);
  REQUIRE(both.size() == 4);
  CHECK(both[0] != both[1]);
  CHECK(both[0] == both[3]);  // the same name twice is one name
  CHECK(both[0] == "at::native::vectori...ctor_add<...>, at::detail::Array<...> >");
  CHECK(both[1] == "at::native::vectori...lFunctor<...>, at::detail::Array<...> >");
  CHECK(both[2] == short_signature(kCta, 61));  // a name shown alone is left as it was
  for (const std::string& s : both) CHECK(display_width(s) <= 61);
}

TEST_CASE("a signature column is shortened in text and md, unfolded in html's cells, whole in csv") {
  Document d;
  d.heading = "job";
  Table t;
  t.id = "kernels";
  t.title = "Top kernels";
  t.headers = {"gpu ms", "kernel"};
  t.numeric = {true, false};
  t.rows = {{"1.000", kCta}, {"0.500", kWarp}};
  t.signature_column = 1;
  d.tables.push_back(t);
  const std::string text = render_text(d);
  CHECK(text.find("kernel_cta_per_row_1<...>") != std::string::npos);
  CHECK(text.find("kernel_warp_per_row_1<...>") != std::string::npos);
  CHECK(text.find("GenericPackedTensorAccessor") == std::string::npos);
  const std::string md = render_markdown(d);
  CHECK(md.find("GenericPackedTensorAccessor") == std::string::npos);
  CHECK(md.find("kernel\\_warp\\_per\\_row\\_1") != std::string::npos);
  CHECK(render_csv(d).find("GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, long>, int)") !=
        std::string::npos);
}

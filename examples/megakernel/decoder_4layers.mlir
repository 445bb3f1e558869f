builtin.module {
  func.func @decoder_4layers(%x: tensor<1x4096xf16> {kn.strides = array<i64: 4096, 1>}, %Wq0: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %Wk0: tensor<4096x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight}, %Wv0: tensor<4096x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight}, %K0: tensor<8x128x4096xf16> {kn.strides = array<i64: 524288, 1, 128>}, %V0: tensor<8x4096x128xf16> {kn.strides = array<i64: 524288, 128, 1>}, %Wo0: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %W10: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W30: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W20: tensor<12288x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %Wq1: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %Wk1: tensor<4096x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight}, %Wv1: tensor<4096x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight}, %K1: tensor<8x128x4096xf16> {kn.strides = array<i64: 524288, 1, 128>}, %V1: tensor<8x4096x128xf16> {kn.strides = array<i64: 524288, 128, 1>}, %Wo1: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %W11: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W31: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W21: tensor<12288x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %Wq2: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %Wk2: tensor<4096x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight}, %Wv2: tensor<4096x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight}, %K2: tensor<8x128x4096xf16> {kn.strides = array<i64: 524288, 1, 128>}, %V2: tensor<8x4096x128xf16> {kn.strides = array<i64: 524288, 128, 1>}, %Wo2: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %W12: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W32: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W22: tensor<12288x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %Wq3: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %Wk3: tensor<4096x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight}, %Wv3: tensor<4096x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight}, %K3: tensor<8x128x4096xf16> {kn.strides = array<i64: 524288, 1, 128>}, %V3: tensor<8x4096x128xf16> {kn.strides = array<i64: 524288, 128, 1>}, %Wo3: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}, %W13: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W33: tensor<4096x12288xf16> {kn.strides = array<i64: 12288, 1>, kn.weight}, %W23: tensor<12288x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight}) -> (tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x4096xf16>) {
    %0 = kn.rms_norm %x {normalized_shape = array<i64: 4096>} : tensor<1x4096xf16>
    %1 = kn.matmul %0, %Wq0 : tensor<1x4096xf16>, tensor<4096x4096xf16> -> tensor<1x4096xf16>
    %2 = kn.reshape %1 : tensor<1x4096xf16> -> tensor<8x4x128xf16>
    %3 = kn.matmul %0, %Wk0 : tensor<1x4096xf16>, tensor<4096x1024xf16> -> tensor<1x1024xf16>
    %4 = kn.matmul %0, %Wv0 : tensor<1x4096xf16>, tensor<4096x1024xf16> -> tensor<1x1024xf16>
    %5 = kn.matmul %2, %K0 : tensor<8x4x128xf16>, tensor<8x128x4096xf16> -> tensor<8x4x4096xf16>
    %6 = kn.mul_scalar %5 {scalar = 0.088388347648318433 : f64} : tensor<8x4x4096xf16>
    %7 = kn.reduction_max %6 {dim = 2 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf16>
    %8 = kn.sub %6, %7 : tensor<8x4x4096xf16>, tensor<8x4x1xf16> -> tensor<8x4x4096xf16>
    %9 = kn.exp %8 : tensor<8x4x4096xf16>
    %10 = kn.matmul %9, %V0 : tensor<8x4x4096xf16>, tensor<8x4096x128xf16> -> tensor<8x4x128xf16>
    %11 = kn.reduction %9 {dim = 2 : i64, size = 1 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf16>
    %12 = kn.div %10, %11 : tensor<8x4x128xf16>, tensor<8x4x1xf16> -> tensor<8x4x128xf16>
    %13 = kn.reshape %12 : tensor<8x4x128xf16> -> tensor<1x4096xf16>
    %14 = kn.matmul %13, %Wo0 : tensor<1x4096xf16>, tensor<4096x4096xf16> -> tensor<1x4096xf16>
    %15 = kn.add %x, %14 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    %16 = kn.rms_norm %15 {normalized_shape = array<i64: 4096>} : tensor<1x4096xf16>
    %17 = kn.matmul %16, %W10 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
    %18 = kn.silu %17 : tensor<1x12288xf16>
    %19 = kn.matmul %16, %W30 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
    %20 = kn.mul %18, %19 : tensor<1x12288xf16>, tensor<1x12288xf16> -> tensor<1x12288xf16>
    %21 = kn.matmul %20, %W20 : tensor<1x12288xf16>, tensor<12288x4096xf16> -> tensor<1x4096xf16>
    %22 = kn.add %15, %21 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    %23 = kn.rms_norm %22 {normalized_shape = array<i64: 4096>} : tensor<1x4096xf16>
    %24 = kn.matmul %23, %Wq1 : tensor<1x4096xf16>, tensor<4096x4096xf16> -> tensor<1x4096xf16>
    %25 = kn.reshape %24 : tensor<1x4096xf16> -> tensor<8x4x128xf16>
    %26 = kn.matmul %23, %Wk1 : tensor<1x4096xf16>, tensor<4096x1024xf16> -> tensor<1x1024xf16>
    %27 = kn.matmul %23, %Wv1 : tensor<1x4096xf16>, tensor<4096x1024xf16> -> tensor<1x1024xf16>
    %28 = kn.matmul %25, %K1 : tensor<8x4x128xf16>, tensor<8x128x4096xf16> -> tensor<8x4x4096xf16>
    %29 = kn.mul_scalar %28 {scalar = 0.088388347648318433 : f64} : tensor<8x4x4096xf16>
    %30 = kn.reduction_max %29 {dim = 2 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf16>
    %31 = kn.sub %29, %30 : tensor<8x4x4096xf16>, tensor<8x4x1xf16> -> tensor<8x4x4096xf16>
    %32 = kn.exp %31 : tensor<8x4x4096xf16>
    %33 = kn.matmul %32, %V1 : tensor<8x4x4096xf16>, tensor<8x4096x128xf16> -> tensor<8x4x128xf16>
    %34 = kn.reduction %32 {dim = 2 : i64, size = 1 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf16>
    %35 = kn.div %33, %34 : tensor<8x4x128xf16>, tensor<8x4x1xf16> -> tensor<8x4x128xf16>
    %36 = kn.reshape %35 : tensor<8x4x128xf16> -> tensor<1x4096xf16>
    %37 = kn.matmul %36, %Wo1 : tensor<1x4096xf16>, tensor<4096x4096xf16> -> tensor<1x4096xf16>
    %38 = kn.add %22, %37 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    %39 = kn.rms_norm %38 {normalized_shape = array<i64: 4096>} : tensor<1x4096xf16>
    %40 = kn.matmul %39, %W11 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
    %41 = kn.silu %40 : tensor<1x12288xf16>
    %42 = kn.matmul %39, %W31 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
    %43 = kn.mul %41, %42 : tensor<1x12288xf16>, tensor<1x12288xf16> -> tensor<1x12288xf16>
    %44 = kn.matmul %43, %W21 : tensor<1x12288xf16>, tensor<12288x4096xf16> -> tensor<1x4096xf16>
    %45 = kn.add %38, %44 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    %46 = kn.rms_norm %45 {normalized_shape = array<i64: 4096>} : tensor<1x4096xf16>
    %47 = kn.matmul %46, %Wq2 : tensor<1x4096xf16>, tensor<4096x4096xf16> -> tensor<1x4096xf16>
    %48 = kn.reshape %47 : tensor<1x4096xf16> -> tensor<8x4x128xf16>
    %49 = kn.matmul %46, %Wk2 : tensor<1x4096xf16>, tensor<4096x1024xf16> -> tensor<1x1024xf16>
    %50 = kn.matmul %46, %Wv2 : tensor<1x4096xf16>, tensor<4096x1024xf16> -> tensor<1x1024xf16>
    %51 = kn.matmul %48, %K2 : tensor<8x4x128xf16>, tensor<8x128x4096xf16> -> tensor<8x4x4096xf16>
    %52 = kn.mul_scalar %51 {scalar = 0.088388347648318433 : f64} : tensor<8x4x4096xf16>
    %53 = kn.reduction_max %52 {dim = 2 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf16>
    %54 = kn.sub %52, %53 : tensor<8x4x4096xf16>, tensor<8x4x1xf16> -> tensor<8x4x4096xf16>
    %55 = kn.exp %54 : tensor<8x4x4096xf16>
    %56 = kn.matmul %55, %V2 : tensor<8x4x4096xf16>, tensor<8x4096x128xf16> -> tensor<8x4x128xf16>
    %57 = kn.reduction %55 {dim = 2 : i64, size = 1 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf16>
    %58 = kn.div %56, %57 : tensor<8x4x128xf16>, tensor<8x4x1xf16> -> tensor<8x4x128xf16>
    %59 = kn.reshape %58 : tensor<8x4x128xf16> -> tensor<1x4096xf16>
    %60 = kn.matmul %59, %Wo2 : tensor<1x4096xf16>, tensor<4096x4096xf16> -> tensor<1x4096xf16>
    %61 = kn.add %45, %60 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    %62 = kn.rms_norm %61 {normalized_shape = array<i64: 4096>} : tensor<1x4096xf16>
    %63 = kn.matmul %62, %W12 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
    %64 = kn.silu %63 : tensor<1x12288xf16>
    %65 = kn.matmul %62, %W32 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
    %66 = kn.mul %64, %65 : tensor<1x12288xf16>, tensor<1x12288xf16> -> tensor<1x12288xf16>
    %67 = kn.matmul %66, %W22 : tensor<1x12288xf16>, tensor<12288x4096xf16> -> tensor<1x4096xf16>
    %68 = kn.add %61, %67 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    %69 = kn.rms_norm %68 {normalized_shape = array<i64: 4096>} : tensor<1x4096xf16>
    %70 = kn.matmul %69, %Wq3 : tensor<1x4096xf16>, tensor<4096x4096xf16> -> tensor<1x4096xf16>
    %71 = kn.reshape %70 : tensor<1x4096xf16> -> tensor<8x4x128xf16>
    %72 = kn.matmul %69, %Wk3 : tensor<1x4096xf16>, tensor<4096x1024xf16> -> tensor<1x1024xf16>
    %73 = kn.matmul %69, %Wv3 : tensor<1x4096xf16>, tensor<4096x1024xf16> -> tensor<1x1024xf16>
    %74 = kn.matmul %71, %K3 : tensor<8x4x128xf16>, tensor<8x128x4096xf16> -> tensor<8x4x4096xf16>
    %75 = kn.mul_scalar %74 {scalar = 0.088388347648318433 : f64} : tensor<8x4x4096xf16>
    %76 = kn.reduction_max %75 {dim = 2 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf16>
    %77 = kn.sub %75, %76 : tensor<8x4x4096xf16>, tensor<8x4x1xf16> -> tensor<8x4x4096xf16>
    %78 = kn.exp %77 : tensor<8x4x4096xf16>
    %79 = kn.matmul %78, %V3 : tensor<8x4x4096xf16>, tensor<8x4096x128xf16> -> tensor<8x4x128xf16>
    %80 = kn.reduction %78 {dim = 2 : i64, size = 1 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf16>
    %81 = kn.div %79, %80 : tensor<8x4x128xf16>, tensor<8x4x1xf16> -> tensor<8x4x128xf16>
    %82 = kn.reshape %81 : tensor<8x4x128xf16> -> tensor<1x4096xf16>
    %83 = kn.matmul %82, %Wo3 : tensor<1x4096xf16>, tensor<4096x4096xf16> -> tensor<1x4096xf16>
    %84 = kn.add %68, %83 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    %85 = kn.rms_norm %84 {normalized_shape = array<i64: 4096>} : tensor<1x4096xf16>
    %86 = kn.matmul %85, %W13 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
    %87 = kn.silu %86 : tensor<1x12288xf16>
    %88 = kn.matmul %85, %W33 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
    %89 = kn.mul %87, %88 : tensor<1x12288xf16>, tensor<1x12288xf16> -> tensor<1x12288xf16>
    %90 = kn.matmul %89, %W23 : tensor<1x12288xf16>, tensor<12288x4096xf16> -> tensor<1x4096xf16>
    %91 = kn.add %84, %90 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    func.return %3, %4, %26, %27, %49, %50, %72, %73, %91 : tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x4096xf16>
  }
}

"""chain.py N: an MLIR spec whose N private functions each call the next once."""
import sys

n = int(sys.argv[1])
print("module {")
for i in range(n - 1):
    print(f"  func.func private @f{i}(%x: tensor<2xf32>) -> tensor<2xf32> {{\n"
          f"    %y = func.call @f{i + 1}(%x) : (tensor<2xf32>) -> tensor<2xf32>\n"
          f"    return %y : tensor<2xf32>\n  }}")
print(f"  func.func private @f{n - 1}(%x: tensor<2xf32>) -> tensor<2xf32> {{\n"
      f"    return %x : tensor<2xf32>\n  }}")
print('  func.func @reference(%x: tensor<2xf32> {ref.name = "x"}) -> (tensor<2xf32> {ref.name = "y"}) '
      'attributes {ref.reference} {\n    %y = func.call @f0(%x) : (tensor<2xf32>) -> tensor<2xf32>\n'
      '    return %y : tensor<2xf32>\n  }\n}')

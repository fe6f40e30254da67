require_relative '../lib/calc'

RSpec.describe Calc do
  it 'adds' do
    expect(Calc.add(2, 3)).to eq(5)
  end

  it 'subtracts' do
    expect(Calc.sub(5, 3)).to eq(2)
  end
end

module Calc
  def self.add(a, b) = a + b
  def self.sub(a, b) = a - b
end

const test = require('node:test');
const assert = require('node:assert');
const { add, sub } = require('../calc');

test('add works', () => { assert.strictEqual(add(2, 3), 5); });

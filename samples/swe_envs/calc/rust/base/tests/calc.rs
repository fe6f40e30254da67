use calc::{add, sub};

#[test]
fn add_works() {
    assert_eq!(add(2, 3), 5);
}

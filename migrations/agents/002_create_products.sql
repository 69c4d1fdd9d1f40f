-- The example product assistant's catalogue (domains/agents/plugins/product_assistant.py reads it).
-- sku: the product code; price_cents: the price in euro cents; stock: units on hand.
CREATE TABLE agent_products (
    sku TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    price_cents INTEGER NOT NULL,
    stock INTEGER NOT NULL
);
INSERT INTO agent_products (sku, name, description, price_cents, stock) VALUES
    ('KB-101', 'Walnut keyboard', 'A mechanical keyboard in a walnut case, tactile switches', 14900, 12),
    ('MS-220', 'Trackball mouse', 'A thumb-operated trackball with four buttons', 5900, 0),
    ('LP-330', 'Desk lamp', 'A dimmable LED desk lamp with a warm-white setting', 3900, 25),
    ('CH-440', 'Office chair', 'An adjustable mesh office chair with lumbar support', 32900, 3),
    ('MN-550', 'Monitor arm', 'A gas-spring monitor arm for screens up to 32 inches', 8900, 7);

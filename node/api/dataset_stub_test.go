package api

import "context"

func (datasetsStub) AddDataset(context.Context, DatasetAdd) (DatasetInfo, error) {
	return DatasetInfo{}, nil
}
func (datasetsStub) DatasetProgress(context.Context, string) (DatasetProgress, error) {
	return DatasetProgress{}, nil
}
func (datasetsStub) Datasets(context.Context) ([]DatasetInfo, error)      { return nil, nil }
func (datasetsStub) Dataset(context.Context, string) (DatasetInfo, error) { return DatasetInfo{}, nil }
func (datasetsStub) RemoveDataset(context.Context, string) (DatasetInfo, error) {
	return DatasetInfo{}, nil
}
func (datasetsStub) GetDataset(context.Context, string, DatasetGet) (DatasetInfo, error) {
	return DatasetInfo{}, nil
}

func (datasetsStub) ImportDataset(context.Context, DatasetImport) (DatasetInfo, error) {
	return DatasetInfo{}, nil
}
func (datasetsStub) ExportDataset(context.Context, string, DatasetExport) (DatasetInfo, error) {
	return DatasetInfo{}, nil
}
func (datasetsStub) SetDatasetAccess(context.Context, string, DatasetAccessRequest) (DatasetInfo, error) {
	return DatasetInfo{}, nil
}
